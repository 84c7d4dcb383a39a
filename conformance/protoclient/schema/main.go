// Command schema prints the protobuf schema of the kinds pv-controller serves, read from the
// Go types of k8s.io/api by reflection: for every message, each field's protobuf number and
// wire type, its JSON name, and whether Go marshals it as a pointer (present only when set)
// and with `omitempty`. The API server's protobuf transcoder is driven by this file:
//
//	go run ./schema > ../../crates/apiserver/src/protobuf/schema.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Field is one protobuf field of a message.
type Field struct {
	JSON   string `json:"json,omitempty"`
	Num    int    `json:"num"`
	Kind   string `json:"kind"`
	Type   string `json:"type,omitempty"`
	Ptr    bool   `json:"ptr,omitempty"`
	Omit   bool   `json:"omit,omitempty"`
	Rep    bool   `json:"rep,omitempty"`
	Map    bool   `json:"map,omitempty"`
	Inline bool   `json:"inline,omitempty"`
}

// Types whose JSON form is not their protobuf message's: the transcoder knows them by name.
var special = map[string]bool{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":       true,
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":  true,
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":   true,
	"k8s.io/apimachinery/pkg/api/resource.Quantity":   true,
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": true,
	"k8s.io/apimachinery/pkg/runtime.RawExtension":    true,
}

var messages = map[string][]Field{}

func name(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

func scalar(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int32:
		return "int32"
	case reflect.Int64, reflect.Int:
		return "int64"
	case reflect.Uint32:
		return "uint32"
	case reflect.Uint64:
		return "uint64"
	case reflect.Float64:
		return "double"
	case reflect.Float32:
		return "float"
	case reflect.Struct:
		visit(t)
		return "message"
	}
	panic(fmt.Sprintf("unsupported type %s", t))
}

func visit(t reflect.Type) {
	n := name(t)
	if _, seen := messages[n]; seen || special[n] {
		messages[n] = messages[n]
		return
	}
	messages[n] = nil
	var fields []Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("protobuf")
		if !ok || tag == "-" {
			continue
		}
		parts := strings.Split(tag, ",")
		num, err := strconv.Atoi(parts[1])
		if err != nil {
			panic(err)
		}
		js := strings.Split(sf.Tag.Get("json"), ",")
		f := Field{JSON: js[0], Num: num}
		for _, o := range js[1:] {
			if o == "omitempty" {
				f.Omit = true
			}
		}
		if f.JSON == "" && sf.Anonymous {
			f.Inline = true
		} else if f.JSON == "" {
			f.JSON = sf.Name
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.Ptr = true
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Uint8:
			f.Kind = "bytes"
		case ft.Kind() == reflect.Slice:
			f.Rep = true
			ft = ft.Elem()
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			f.Kind = scalar(ft)
		case ft.Kind() == reflect.Map:
			f.Map = true
			if ft.Key().Kind() != reflect.String {
				panic(fmt.Sprintf("%s.%s: map key %s", n, sf.Name, ft.Key()))
			}
			ft = ft.Elem()
			switch {
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Uint8:
				f.Kind = "bytes" // map<string, bytes>: a Secret's data
			case ft.Kind() == reflect.Slice:
				panic(fmt.Sprintf("%s.%s: map of slices", n, sf.Name))
			default:
				f.Kind = scalar(ft)
			}
		default:
			f.Kind = scalar(ft)
		}
		if f.Kind == "message" {
			f.Type = name(ft)
		}
		fields = append(fields, f)
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].Num < fields[j].Num })
	messages[n] = fields
}

func main() {
	roots := []any{
		corev1.PersistentVolume{}, corev1.PersistentVolumeList{},
		corev1.PersistentVolumeClaim{}, corev1.PersistentVolumeClaimList{},
		corev1.Pod{}, corev1.PodList{}, corev1.Node{}, corev1.NodeList{},
		corev1.Namespace{}, corev1.NamespaceList{}, corev1.Event{}, corev1.EventList{},
		corev1.Service{}, corev1.ServiceList{},
		corev1.Secret{}, corev1.SecretList{}, corev1.ConfigMap{}, corev1.ConfigMapList{},
		corev1.ServiceAccount{}, corev1.ServiceAccountList{},
		storagev1.StorageClass{}, storagev1.StorageClassList{},
		storagev1.CSIDriver{}, storagev1.CSIDriverList{}, storagev1.CSINode{}, storagev1.CSINodeList{},
		storagev1.VolumeAttachment{}, storagev1.VolumeAttachmentList{},
		storagev1.CSIStorageCapacity{}, storagev1.CSIStorageCapacityList{},
		storagev1.VolumeAttributesClass{}, storagev1.VolumeAttributesClassList{},
		coordinationv1.Lease{}, coordinationv1.LeaseList{},
		eventsv1.Event{}, eventsv1.EventList{},
		metav1.Status{}, metav1.WatchEvent{}, metav1.DeleteOptions{},
	}
	for _, r := range roots {
		visit(reflect.TypeOf(r))
	}
	for n := range special {
		delete(messages, n)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(messages); err != nil {
		panic(err)
	}
}
