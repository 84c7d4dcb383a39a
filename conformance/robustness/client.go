package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	namespace  = "robustness"
	valueKey   = "robustness.example.com/v"
	finalizer  = "robustness.example.com/f"
	labelQuery = "labelSelector=robustness%3D1"
)

// Kinds the clients write, with their collection paths.
var kinds = map[string]string{
	"configmaps":             "/api/v1/namespaces/" + namespace + "/configmaps",
	"persistentvolumes":      "/api/v1/persistentvolumes",
	"persistentvolumeclaims": "/api/v1/namespaces/" + namespace + "/persistentvolumeclaims",
}

var kindOrder = []string{"configmaps", "persistentvolumes", "persistentvolumeclaims"}

// Client talks to one API server with a kubeconfig's server, CA and token.
type Client struct {
	server string
	token  string
	http   *http.Client
	tlsCfg *tls.Config
}

func newClient(kubeconfig string) (*Client, error) {
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, err
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Token string `yaml:"token"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return nil, err
	}
	if len(kc.Clusters) == 0 || len(kc.Users) == 0 {
		return nil, fmt.Errorf("%s: no cluster or user", kubeconfig)
	}
	ca, err := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no CA certificate", kubeconfig)
	}
	tlsCfg := &tls.Config{RootCAs: pool}
	tr := &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 64, DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext}
	return &Client{server: kc.Clusters[0].Cluster.Server, token: kc.Users[0].User.Token, http: &http.Client{Transport: tr}, tlsCfg: tlsCfg}, nil
}

// Answer is what a request got: Status 0 when no answer came (unknown outcome), -1 when the
// request was never sent.
type Answer struct {
	Status int
	Body   []byte
}

func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// do sends one request, waiting at most timeout for the whole answer.
func (c *Client) do(method, path, contentType string, body []byte, timeout time.Duration) Answer {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, bytes.NewReader(body))
	if err != nil {
		return Answer{Status: -1}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if refused(err) {
			return Answer{Status: -1}
		}
		return Answer{Status: 0}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{Status: 0}
	}
	return Answer{Status: resp.StatusCode, Body: b}
}

// objOf reads what the checks need of an object's JSON.
func objOf(raw json.RawMessage) *Obj {
	var o struct {
		Metadata struct {
			Name              string            `json:"name"`
			ResourceVersion   string            `json:"resourceVersion"`
			Annotations       map[string]string `json:"annotations"`
			Finalizers        []string          `json:"finalizers"`
			DeletionTimestamp *string           `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return nil
	}
	return &Obj{Name: o.Metadata.Name, RV: o.Metadata.ResourceVersion, Val: o.Metadata.Annotations[valueKey],
		Fin: len(o.Metadata.Finalizers) > 0, Term: o.Metadata.DeletionTimestamp != nil}
}

// newObject is a kind's object with name, value and (when fin) this test's finalizer.
func newObject(kind, name, val string, fin bool) []byte {
	meta := map[string]any{"name": name, "labels": map[string]string{"robustness": "1"},
		"annotations": map[string]string{valueKey: val}}
	if fin {
		meta["finalizers"] = []string{finalizer}
	}
	var o map[string]any
	switch kind {
	case "configmaps":
		meta["namespace"] = namespace
		o = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": map[string]string{"v": val}}
	case "persistentvolumes":
		o = map[string]any{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": map[string]any{
			"capacity": map[string]string{"storage": "1Gi"}, "accessModes": []string{"ReadWriteOnce"},
			"storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
			"nfs": map[string]string{"server": "nfs.example.com", "path": "/exports/" + name}}}
	case "persistentvolumeclaims":
		meta["namespace"] = namespace
		o = map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": map[string]any{
			"accessModes": []string{"ReadWriteOnce"}, "storageClassName": "",
			"resources": map[string]any{"requests": map[string]string{"storage": "1Gi"}}}}
	}
	b, _ := json.Marshal(o)
	return b
}
