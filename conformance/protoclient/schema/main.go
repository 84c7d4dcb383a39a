// Command schema prints the protobuf schema of the kinds pv-controller serves, read from the
// Go types of k8s.io/api by reflection: for every message, each field's protobuf number and
// wire type, its JSON name, and whether Go marshals it as a pointer (present only when set)
// and with `omitempty`. The kinds are read from standard input, one JSON object per line with
// `group`, `version` and `kind`, as pv-apiserver's `served` example prints the store's registry;
// each kind's Go type (and its list's) is client-go's scheme's (a kind outside it, as
// apiextensions.k8s.io's, is named on standard error and left out), so a kind added to the registry
// needs no edit here. The API server's protobuf transcoder is driven by this file:
//
//	cargo run -q -p pv-apiserver --example served | go run ./schema > ../../crates/apiserver/src/protobuf/schema.json
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
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
	roots := []any{metav1.Status{}, metav1.WatchEvent{}, metav1.DeleteOptions{}}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var served struct{ Group, Version, Kind string }
		if err := json.Unmarshal(in.Bytes(), &served); err != nil {
			panic(fmt.Sprintf("standard input: %q: %v", in.Text(), err))
		}
		for _, kind := range []string{served.Kind, served.Kind + "List"} {
			gvk := schema.GroupVersionKind{Group: served.Group, Version: served.Version, Kind: kind}
			if !scheme.Scheme.Recognizes(gvk) {
				// apiextensions.k8s.io is not in client-go's scheme (its own clientset's); its
				// definitions are served as JSON only, as before.
				fmt.Fprintf(os.Stderr, "schema: %s is not in client-go's scheme: no protobuf schema\n", gvk)
				continue
			}
			obj, err := scheme.Scheme.New(gvk)
			if err != nil {
				panic(fmt.Sprintf("%s: %v", gvk, err))
			}
			roots = append(roots, reflect.ValueOf(obj).Elem().Interface())
		}
	}
	if len(roots) == 3 {
		panic("no kind on standard input: cargo run -q -p pv-apiserver --example served | go run ./schema")
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
