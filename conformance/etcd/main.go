// Command etcd is the upstream etcd server, built from go.etcd.io/etcd/server/v3
// so the conformance cluster needs nothing but Go and the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
