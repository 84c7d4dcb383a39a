// Package protoclient checks that client-go, speaking protobuf as kube-controller-manager and
// kube-scheduler do, can create, read, list, watch, update and delete every kind that
// `pv-controller up` serves. It starts `PV_CONTROLLER up --no-controller` itself and is skipped
// when PV_CONTROLLER (the path of the binary) is not set:
//
//	PV_CONTROLLER=$PWD/target/release/pv-controller go -C conformance/protoclient test ./...
package protoclient

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// client starts the server and returns a clientset that sends and asks for protobuf only, so
// that a JSON answer would fail to decode instead of passing unnoticed.
func client(t *testing.T) *kubernetes.Clientset {
	bin := os.Getenv("PV_CONTROLLER")
	if bin == "" {
		t.Skip("PV_CONTROLLER is not set: the path of the pv-controller binary")
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "up", "--no-controller", "--data-dir", dir, "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	kubeconfig := ""
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if k, ok := strings.CutPrefix(lines.Text(), "kubeconfig: "); ok {
			kubeconfig = k
		}
		if strings.HasPrefix(lines.Text(), "server: ") {
			break
		}
	}
	go func() {
		for lines.Scan() {
		}
	}()
	if kubeconfig == "" {
		t.Fatal("pv-controller up printed no kubeconfig line")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf
	return kubernetes.NewForConfigOrDie(cfg)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func pv(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"made-by": "client-go"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "manual",
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name},
			},
		},
	}
}

func TestPersistentVolumesCreateGetListWatchUpdateDelete(t *testing.T) {
	cs, c := client(t), ctx(t)
	pvs := cs.CoreV1().PersistentVolumes()
	created, err := pvs.Create(c, pv("a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if q := created.Spec.Capacity[corev1.ResourceStorage]; q.String() != "2Gi" || created.UID == "" {
		t.Fatalf("created: capacity %s uid %q", q.String(), created.UID)
	}
	got, err := pvs.Get(c, "a", metav1.GetOptions{})
	if err != nil || got.Spec.HostPath == nil || got.Spec.HostPath.Path != "/tmp/a" || got.Labels["made-by"] != "client-go" {
		t.Fatalf("get: %v %+v", err, got)
	}
	list, err := pvs.List(c, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.ResourceVersion == "" {
		t.Fatalf("list: %v %+v", err, list)
	}
	w, err := pvs.Watch(c, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	if _, err := pvs.Create(c, pv("b"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create b: %v", err)
	}
	got.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	if _, err := pvs.Update(c, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	got, _ = pvs.Get(c, "a", metav1.GetOptions{})
	got.Status.Phase = corev1.VolumeAvailable
	if _, err := pvs.UpdateStatus(c, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	wrong := metav1.NewUIDPreconditions("wrong")
	if err := pvs.Delete(c, "b", metav1.DeleteOptions{Preconditions: wrong}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a wrong uid precondition: want a Conflict, got %v", err)
	}
	if err := pvs.Delete(c, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// The delete marks b: admission gave it the pv-protection finalizer, which
	// kube-controller-manager's pv-protection controller would remove (none runs here).
	held, err := pvs.Get(c, "b", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("b after delete: want it marked, got %v %+v", err, held)
	}
	held.Finalizers = nil
	if _, err := pvs.Update(c, held, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("release b: %v", err)
	}
	want := []string{"ADDED b", "MODIFIED a", "MODIFIED a", "MODIFIED b", "DELETED b"}
	var seen []string
	for len(seen) < len(want) {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			seen = append(seen, string(ev.Type)+" "+ev.Object.(*corev1.PersistentVolume).Name)
		case <-c.Done():
			t.Fatalf("watch: saw %v, want %v", seen, want)
		}
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("watch: saw %v, want %v", seen, want)
	}
	if _, err := pvs.Get(c, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get missing: want NotFound, got %v", err)
	}
}

// An informer is how kube-controller-manager reads: list, then watch, in protobuf.
func TestInformerSyncsAndFollows(t *testing.T) {
	cs, c := client(t), ctx(t)
	if _, err := cs.CoreV1().PersistentVolumes().Create(c, pv("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().PersistentVolumes()
	added := make(chan string, 10)
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { added <- o.(*corev1.PersistentVolume).Name },
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(c.Done())
	if !cache.WaitForCacheSync(c.Done(), inf.Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(c, pv("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for len(names) < 2 {
		select {
		case n := <-added:
			names[n] = true
		case <-c.Done():
			t.Fatalf("informer saw %v", names)
		}
	}
}

func TestEveryServedKind(t *testing.T) {
	cs, c := client(t), ctx(t)
	ns := "data"
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := cs.CoreV1().Namespaces().Create(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must("namespace", err)
	class := "manual"
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(c, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: &class,
		},
	}, metav1.CreateOptions{})
	must("claim", err)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	_, err = cs.StorageV1().StorageClasses().Create(c, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/host-path",
		Parameters: map[string]string{"a": "1"}, VolumeBindingMode: &mode,
	}, metav1.CreateOptions{})
	must("storage class", err)
	_, err = cs.CoreV1().Nodes().Create(c, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	must("node", err)
	_, err = cs.CoreV1().Pods(ns).Create(c, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox",
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}},
		},
	}, metav1.CreateOptions{})
	must("pod", err)
	holder, secs := "me", int32(15)
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	_, err = cs.CoordinationV1().Leases(ns).Create(c, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lease"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now},
	}, metav1.CreateOptions{})
	must("lease", err)
	ref := corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: "claim", APIVersion: "v1"}
	_, err = cs.CoreV1().Events(ns).Create(c, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "core-event"}, InvolvedObject: ref, Reason: "R", Message: "m",
		Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "protoclient"}, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{})
	must("core/v1 event", err)
	_, err = cs.EventsV1().Events(ns).Create(c, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "v1-event"}, EventTime: now, Regarding: ref, Reason: "R", Note: "n",
		Type: "Warning", Action: "Binding", ReportingController: "protoclient", ReportingInstance: "protoclient-1",
	}, metav1.CreateOptions{})
	must("events.k8s.io/v1 event", err)

	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(c, metav1.ListOptions{})
	must("list claims", err)
	if q := claims.Items[0].Spec.Resources.Requests[corev1.ResourceStorage]; len(claims.Items) != 1 || q.String() != "1Gi" {
		t.Fatalf("claims: %+v", claims.Items)
	}
	sc, err := cs.StorageV1().StorageClasses().Get(c, class, metav1.GetOptions{})
	must("get class", err)
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != mode || sc.Parameters["a"] != "1" {
		t.Fatalf("class: %+v", sc)
	}
	nodes, err := cs.CoreV1().Nodes().List(c, metav1.ListOptions{})
	must("list nodes", err)
	// The given taint, then the not-ready one TaintNodesByCondition adds, as kube-apiserver does.
	if len(nodes.Items) != 1 || len(nodes.Items[0].Spec.Taints) != 2 || nodes.Items[0].Spec.Taints[1].Key != "node.kubernetes.io/not-ready" {
		t.Fatalf("nodes: %+v", nodes.Items)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(c, "pod", metav1.GetOptions{})
	must("get pod", err)
	if pod.Spec.Containers[0].ReadinessProbe.TCPSocket.Port.IntValue() != 80 || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "claim" {
		t.Fatalf("pod: %+v", pod.Spec)
	}
	lease, err := cs.CoordinationV1().Leases(ns).Get(c, "lease", metav1.GetOptions{})
	must("get lease", err)
	if *lease.Spec.HolderIdentity != holder || !lease.Spec.RenewTime.Equal(&now) {
		t.Fatalf("lease: renew %v want %v", lease.Spec.RenewTime, now)
	}
	evs, err := cs.CoreV1().Events(ns).List(c, metav1.ListOptions{})
	must("list core events", err)
	v1evs, err := cs.EventsV1().Events(ns).List(c, metav1.ListOptions{})
	must("list events.k8s.io events", err)
	if len(evs.Items) != 2 || len(v1evs.Items) != 2 {
		t.Fatalf("events: %d core, %d events.k8s.io", len(evs.Items), len(v1evs.Items))
	}
	nsList, err := cs.CoreV1().Namespaces().List(c, metav1.ListOptions{})
	must("list namespaces", err)
	if len(nsList.Items) < 2 {
		t.Fatalf("namespaces: %+v", nsList.Items)
	}
	// RBAC's kinds, as a driver's deploy manifests make them (stored, not enforced).
	_, err = cs.RbacV1().ClusterRoles().Create(c, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-provisioner"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "create"}}},
	}, metav1.CreateOptions{})
	must("cluster role", err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(c, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-provisioner"},
		RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "csi-provisioner"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "csi-provisioner", Namespace: ns}},
	}, metav1.CreateOptions{})
	must("cluster role binding", err)
	_, err = cs.RbacV1().Roles(ns).Create(c, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "leases"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}}},
	}, metav1.CreateOptions{})
	must("role", err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "leases"},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "leases"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "jane"}},
	}, metav1.CreateOptions{})
	must("role binding", err)
	crb, err := cs.RbacV1().ClusterRoleBindings().Get(c, "csi-provisioner", metav1.GetOptions{})
	must("get cluster role binding", err)
	if crb.RoleRef.APIGroup != rbacv1.GroupName || crb.Subjects[0].Namespace != ns {
		t.Fatalf("cluster role binding: %+v", crb)
	}
	roles, err := cs.RbacV1().ClusterRoles().List(c, metav1.ListOptions{})
	must("list cluster roles", err)
	if len(roles.Items) != 1 || roles.Items[0].Rules[0].Verbs[1] != "create" {
		t.Fatalf("cluster roles: %+v", roles.Items)
	}
	rb, err := cs.RbacV1().RoleBindings(ns).Get(c, "leases", metav1.GetOptions{})
	must("get role binding", err)
	if rb.Subjects[0].APIGroup != rbacv1.GroupName || rb.RoleRef.APIGroup != rbacv1.GroupName {
		t.Fatalf("role binding not defaulted: %+v", rb)
	}
	role, err := cs.RbacV1().Roles(ns).Get(c, "leases", metav1.GetOptions{})
	must("get role", err)
	if role.Rules[0].Resources[0] != "leases" {
		t.Fatalf("role: %+v", role)
	}
}
