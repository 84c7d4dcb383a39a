	a==b
status.phase=Running