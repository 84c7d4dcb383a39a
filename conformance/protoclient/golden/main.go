// Command golden encodes each JSON object in a directory the way kube-apiserver does: NAME.pb
// is upstream's protobuf serialization of NAME.json, and NAME.go.json upstream's JSON of the
// same typed object. The API server's transcoder is tested against both:
//
//	go run ./golden ../../crates/apiserver/tests/protobuf
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func main() {
	dir := os.Args[1]
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		panic(err)
	}
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for _, f := range files {
		if strings.HasSuffix(f, ".go.json") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		var tm struct{ APIVersion, Kind string }
		if err := json.Unmarshal(data, &tm); err != nil {
			panic(fmt.Sprintf("%s: %v", f, err))
		}
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			panic(err)
		}
		obj, err := scheme.Scheme.New(gv.WithKind(tm.Kind))
		if err != nil {
			panic(fmt.Sprintf("%s: %v", f, err))
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			panic(fmt.Sprintf("%s: %v", f, err))
		}
		obj.GetObjectKind().SetGroupVersionKind(gv.WithKind(tm.Kind))
		var out bytes.Buffer
		if err := pb.Encode(obj, &out); err != nil {
			panic(fmt.Sprintf("%s: %v", f, err))
		}
		base := strings.TrimSuffix(f, ".json")
		if err := os.WriteFile(base+".pb", out.Bytes(), 0o644); err != nil {
			panic(err)
		}
		js, err := json.Marshal(obj)
		if err != nil {
			panic(err)
		}
		if err := os.WriteFile(base+".go.json", append(js, '\n'), 0o644); err != nil {
			panic(err)
		}
	}
}
