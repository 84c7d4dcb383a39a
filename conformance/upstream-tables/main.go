// Command upstream-tables writes the cases of upstream's PersistentVolume controller unit-test
// tables as data, for the project's replay (scripts/e2e-upstream-tables.sh).
//
// It copies upstream's package pkg/controller/volume/persistentvolume (and its testing
// subpackage) of the k8s.io/kubernetes release in conformance/go.mod from the Go module cache
// into a scratch module under -work, adds a recorder (hook/*.in) and a few one-line calls to it
// at fixed places of upstream's test framework (the rewrites below; each must match exactly
// once, or this command fails naming it), and runs upstream's tests there with
// UPSTREAM_TABLES_OUT=-out: every case of runSyncTests, runMultisyncTests and
// TestControllerSync, every volume search an index test makes and every call of the two matching
// checks the index tests call (volume mode, access modes), and of the migration annotations and
// deletion finalizers two controller tests check, becomes one JSON file in
// -out. Upstream's own verdict on its controller is kept in each case (upstreamPassed). Nothing
// of upstream's is copied into this repository.
//
// Usage: go run ./upstream-tables -work DIR -out DIR (from conformance/).
package main

import (
	"embed"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed hook/*.in
var hooks embed.FS

const (
	upstreamPkg = "k8s.io/kubernetes/pkg/controller/volume/persistentvolume"
	module      = "upstreamtables"
)

// A rewrite of one file: old must occur exactly once.
type rewrite struct{ file, old, new string }

var rewrites = []rewrite{
	// Each case of the three runners starts and ends a record.
	{"framework_test.go", "	doit := func(t *testing.T, test controllerTest) {\n",
		"	doit := func(t *testing.T, test controllerTest) {\n		rec := recordStart(t, \"sync\", test, storageClasses, pods)\n		defer rec.finish(t)\n"},
	{"framework_test.go", "	run := func(t *testing.T, test controllerTest) {\n",
		"	run := func(t *testing.T, test controllerTest) {\n		rec := recordStart(t, \"multisync\", test, storageClasses, nil)\n		defer rec.finish(t)\n"},
	{"pv_controller_test.go", "	doit := func(test controllerTest) {\n", "	doit := func(t *testing.T, test controllerTest) {\n"},
	{"pv_controller_test.go", "			doit(test)\n", "			doit(t, test)\n"},
	{"pv_controller_test.go", "		reactor := newVolumeReactor(ctx, client, ctrl, fakeVolumeWatch, fakeClaimWatch, test.errors)\n",
		"		rec := recordStart(t, \"controller\", test, storageClasses, nil)\n		defer rec.finish(t)\n		reactor := newVolumeReactor(ctx, client, ctrl, fakeVolumeWatch, fakeClaimWatch, test.errors)\n"},
	// The sync a case performs.
	{"framework_test.go", "func testSyncClaim(ctrl *PersistentVolumeController, reactor *pvtesting.VolumeReactor, test controllerTest) error {\n",
		"func testSyncClaim(ctrl *PersistentVolumeController, reactor *pvtesting.VolumeReactor, test controllerTest) error {\n	recordSync(test, \"claim\", false)\n"},
	{"framework_test.go", "func testSyncClaimError(ctrl *PersistentVolumeController, reactor *pvtesting.VolumeReactor, test controllerTest) error {\n",
		"func testSyncClaimError(ctrl *PersistentVolumeController, reactor *pvtesting.VolumeReactor, test controllerTest) error {\n	recordSync(test, \"claim\", true)\n"},
	{"framework_test.go", "func testSyncVolume(ctrl *PersistentVolumeController, reactor *pvtesting.VolumeReactor, test controllerTest) error {\n",
		"func testSyncVolume(ctrl *PersistentVolumeController, reactor *pvtesting.VolumeReactor, test controllerTest) error {\n	recordSync(test, \"volume\", false)\n"},
	// What the plugin answers, CSI migration, and what changes before an operation starts.
	{"framework_test.go", "		plugin := &mockVolumePlugin{\n			recycleCalls:   expectedRecycleCalls,\n",
		"		recordPlugin(test, expectedRecycleCalls, expectedDeleteCalls, expectedProvisionCalls)\n		plugin := &mockVolumePlugin{\n			recycleCalls:   expectedRecycleCalls,\n"},
	{"framework_test.go", "		ctrl.translator = fakeCSINameTranslator{}\n",
		"		ctrl.translator = fakeCSINameTranslator{}\n		recordCSIMigration(test)\n"},
	{"framework_test.go", "			injectBeforeOperation(ctrl, reactor)\n",
		"			recordInjection(test, ctrl, reactor, func() { injectBeforeOperation(ctrl, reactor) })\n"},
	// The index's search, seen by index_record.go.
	{"index.go", "func (pvIndex *persistentVolumeOrderedIndex) findBestMatchForClaim(",
		"func (pvIndex *persistentVolumeOrderedIndex) findBestMatchForClaimUpstream("},
	// The matching checks two index tests call directly.
	{"index_test.go", "expectedMismatch := volume.CheckVolumeModeMismatches(&scenario.pvc.Spec, &scenario.vol.Spec)",
		"expectedMismatch := recordCheck(t.Name(), \"volumeMode\", scenario.pvc, scenario.vol, volume.CheckVolumeModeMismatches(&scenario.pvc.Spec, &scenario.vol.Spec))"},
	{"index_test.go", "result := volume.CheckAccessModes(scenario.claim, pv)",
		"result := recordCheck(t.Name()+\"/\"+name, \"accessModes\", scenario.claim, pv, volume.CheckAccessModes(scenario.claim, pv))"},
	// The migration annotations and deletion finalizers two controller tests check.
	{"pv_controller_test.go", "				updateMigrationAnnotations(logger, cmpm, translator, ann, false)\n",
		"				recordMigration(t.Name(), ann, false, func() bool { return updateMigrationAnnotations(logger, cmpm, translator, ann, false) })\n"},
	{"pv_controller_test.go", "				updateMigrationAnnotations(logger, cmpm, translator, ann, true)\n",
		"				recordMigration(t.Name(), ann, true, func() bool { return updateMigrationAnnotations(logger, cmpm, translator, ann, true) })\n"},
	{"pv_controller_test.go", "modifiedFinalizers, modified := modifyDeletionFinalizers(logger, cmpm, tc.initialVolume)",
		"modifiedFinalizers, modified := recordFinalizers(t.Name(), tc.initialVolume, func() ([]string, bool) { return modifyDeletionFinalizers(logger, cmpm, tc.initialVolume) })"},
	// API changes a controller test makes.
	{"testing/testing.go", "func (r *VolumeReactor) DeleteVolumeEvent(volume *v1.PersistentVolume) {\n",
		"func (r *VolumeReactor) DeleteVolumeEvent(volume *v1.PersistentVolume) {\n	eventHook(\"delete-volume\", volume.DeepCopy())\n"},
	{"testing/testing.go", "func (r *VolumeReactor) DeleteClaimEvent(claim *v1.PersistentVolumeClaim) {\n",
		"func (r *VolumeReactor) DeleteClaimEvent(claim *v1.PersistentVolumeClaim) {\n	eventHook(\"delete-claim\", claim.DeepCopy())\n"},
	{"testing/testing.go", "func (r *VolumeReactor) AddClaimEvent(claim *v1.PersistentVolumeClaim) {\n",
		"func (r *VolumeReactor) AddClaimEvent(claim *v1.PersistentVolumeClaim) {\n	eventHook(\"add-claim\", claim.DeepCopy())\n"},
}

func main() {
	work := flag.String("work", "", "scratch directory (emptied)")
	out := flag.String("out", "", "directory for the cases (emptied)")
	run := flag.String("run", "", "go test -run pattern (default: all tests)")
	flag.Parse()
	if *work == "" || *out == "" {
		fail("usage: upstream-tables -work DIR -out DIR")
	}
	if err := extract(*work, *out, *run); err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "upstream-tables:", msg)
	os.Exit(1)
}

func extract(work, out, runPattern string) error {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		return fmt.Errorf("go list -m k8s.io/kubernetes (run from conformance/): %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(dir)), "pkg/controller/volume/persistentvolume")
	for _, d := range []string{work, out} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The scratch module: conformance's go.mod and go.sum under another name.
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		return err
	}
	lines := strings.SplitN(string(gomod), "\n", 2)
	if !strings.HasPrefix(lines[0], "module ") {
		return fmt.Errorf("go.mod does not start with its module line")
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module "+module+"\n"+lines[1]), 0o644); err != nil {
		return err
	}
	if err := copyFile("go.sum", filepath.Join(work, "go.sum")); err != nil {
		return err
	}
	pkg := filepath.Join(work, "persistentvolume")
	for _, sub := range []string{"", "testing"} {
		entries, err := os.ReadDir(filepath.Join(src, sub))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(pkg, sub), 0o755); err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			if err := copyFile(filepath.Join(src, sub, e.Name()), filepath.Join(pkg, sub, e.Name())); err != nil {
				return err
			}
		}
	}
	// The package's own testing subpackage is the copy's.
	files, _ := filepath.Glob(filepath.Join(pkg, "*.go"))
	for _, f := range files {
		if err := replaceAll(f, upstreamPkg+"/testing", module+"/persistentvolume/testing"); err != nil {
			return err
		}
	}
	for _, r := range rewrites {
		if err := replaceOnce(filepath.Join(pkg, r.file), r.old, r.new); err != nil {
			return err
		}
	}
	for in, to := range map[string]string{
		"hook/record_test.go.in":       "zz_record_test.go",
		"hook/index_record.go.in":      "zz_index_record.go",
		"hook/index_record_test.go.in": "zz_index_record_test.go",
		"hook/reactor_record.go.in":    "testing/zz_reactor_record.go",
	} {
		data, err := hooks.ReadFile(in)
		if err != nil {
			return err
		}
		data = []byte(strings.ReplaceAll(string(data), "UPSTREAM_TABLES_MODULE", module))
		if err := os.WriteFile(filepath.Join(pkg, to), data, 0o644); err != nil {
			return err
		}
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	args := []string{"test", "-count=1", "-mod=mod", "./persistentvolume/"}
	if runPattern != "" {
		args = append(args, "-run", runPattern)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "UPSTREAM_TABLES_OUT="+abs)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Upstream's verdicts are kept in the cases; a failing upstream test is not this command's
	// failure, but a build failure is.
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return err
		}
	}
	n, _ := filepath.Glob(filepath.Join(abs, "*.json"))
	if len(n) == 0 {
		return fmt.Errorf("no case recorded: upstream's tests did not build or run")
	}
	fmt.Printf("upstream-tables: %d cases in %s\n", len(n), out)
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

func replaceAll(file, old, new string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, []byte(strings.ReplaceAll(string(data), old, new)), 0o644)
}

func replaceOnce(file, old, new string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if n := strings.Count(string(data), old); n != 1 {
		return fmt.Errorf("%s: the rewrite of %q matches %d times, not once: upstream's test framework changed", filepath.Base(file), strings.SplitN(old, "\n", 2)[0], n)
	}
	return os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644)
}
