module github.com/pv-controller/conformance/robustness

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	go.yaml.in/yaml/v3 v3.0.4
)
