// opstatus's probe as a Go user would write it with client-go: a shared
// informer (dynamic, as for a CRD without generated types; client-go's
// defaults: a first list from the watch cache, then a watch, the informer's
// store holding the objects) over the Foos in one namespace, evaluating
// `Upgradeable=!Migrating` over the store once synced and on every change
// after, and writing the OperatorCondition (a GET, then an `update` of its
// `spec.conditions`) when the answer flips. Arguments: the Foos' namespace
// and the OperatorCondition's name (in the service account's namespace).
// In-cluster style, as bench/peers/src/kube_writer.rs. Built by
// bench/peers/client-go/build.sh against the client-go vendored in
// Debian's kubernetes source (GOPATH mode, no module download).
package main

import (
	"context"
	"fmt"
	"io/ioutil"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// blocking: a Foo whose Migrating condition is "True"; unknown never blocks.
func blocking(obj interface{}) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	status, _ := u.Object["status"].(map[string]interface{})
	conditions, _ := status["conditions"].([]interface{})
	for _, c := range conditions {
		m, _ := c.(map[string]interface{})
		if m["type"] == "Migrating" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func main() {
	sa := os.Getenv("OPSTATUS_SERVICE_ACCOUNT_DIR")
	if len(os.Args) != 3 || sa == "" {
		fmt.Fprintln(os.Stderr, "usage: OPSTATUS_SERVICE_ACCOUNT_DIR=DIR informer FOO_NAMESPACE OPERATOR_CONDITION")
		os.Exit(2)
	}
	fooNS, ocName := os.Args[1], os.Args[2]
	nsBytes, err := ioutil.ReadFile(sa + "/namespace")
	if err != nil {
		panic(err)
	}
	namespace := strings.TrimSpace(string(nsBytes))
	config := &rest.Config{
		Host:            "https://" + os.Getenv("KUBERNETES_SERVICE_HOST") + ":" + os.Getenv("KUBERNETES_SERVICE_PORT"),
		BearerTokenFile: sa + "/token",
		TLSClientConfig: rest.TLSClientConfig{CAFile: sa + "/ca.crt"},
	}
	client := dynamic.NewForConfigOrDie(config)
	foos := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "foos"}
	ocs := schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v2", Resource: "operatorconditions"}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, fooNS, nil)
	informer := factory.ForResource(foos).Informer()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { poke() },
		UpdateFunc: func(interface{}, interface{}) { poke() },
		DeleteFunc: func(interface{}) { poke() },
	})
	stop := make(chan struct{})
	started := time.Now()
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		panic("the informer never synced")
	}
	fmt.Fprintf(os.Stderr, "listed %d Foos in %.2f s\n", len(informer.GetStore().ListKeys()), time.Since(started).Seconds())
	var written *bool
	for {
		objects := informer.GetStore().List()
		blockers := 0
		for _, o := range objects {
			if blocking(o) {
				blockers++
			}
		}
		upgradeable := blockers == 0
		if written == nil || *written != upgradeable {
			status, reason := "True", "AsExpected"
			message := fmt.Sprintf("No resource blocks an upgrade (%d checked)", len(objects))
			if !upgradeable {
				status, reason = "False", "NotUpgradeable"
				message = fmt.Sprintf("Upgrade blocked by %d resources", blockers)
			}
			api := client.Resource(ocs).Namespace(namespace)
			oc, err := api.Get(context.TODO(), ocName, metav1.GetOptions{})
			if err != nil {
				panic(err)
			}
			conditions, _, _ := unstructured.NestedSlice(oc.Object, "spec", "conditions")
			kept := []interface{}{}
			for _, c := range conditions {
				if m, ok := c.(map[string]interface{}); !ok || m["type"] != "Upgradeable" {
					kept = append(kept, c)
				}
			}
			kept = append(kept, map[string]interface{}{"type": "Upgradeable", "status": status, "reason": reason,
				"message": message, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
			if err := unstructured.SetNestedSlice(oc.Object, kept, "spec", "conditions"); err != nil {
				panic(err)
			}
			if _, err := api.Update(context.TODO(), oc, metav1.UpdateOptions{}); err != nil {
				panic(err)
			}
			written = &upgradeable
		}
		<-changed
	}
}
