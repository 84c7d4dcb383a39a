	apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: fz
  labels: {a: b}
