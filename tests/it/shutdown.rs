//! SIGTERM, SIGINT and SIGHUP stop the agent promptly with exit code 0 (it
//! may run as PID 1, where no default handler would; SIGHUP's default
//! would end it with 129, no final status and the lock held). A publisher first hands the
//! lock over and waits for a standby to take it (a check interval, its own
//! checks' time and 2 s: tests/it/replicas.rs); alone, it then says
//! "Shutting down".
//! kubelet's preStop hook (`opstatus prestop`) makes a publisher hand over
//! early; alone, it publishes on, and its SIGTERM still ends as above.

use crate::support;
use crate::support::run_args::Run;

use std::time::{Duration, Instant};
use support::fake_apiserver::{FakeApiServer, Fault};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-shutdown-tests";

#[test]
fn sigterm_sigint_and_sighup_exit_0_within_the_handover_wait_and_two_seconds() {
    for signal in ["TERM", "INT", "HUP"] {
        let server = FakeApiServer::start(TOKEN);
        let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
        let args = ["run", "--interval", "60s", "--check-interval", "1s"];
        let mut agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(server.port(), &sa));
        server.wait_status_configmap(Duration::from_secs(10)).expect("first write");
        let sent = Instant::now();
        agent.signal(signal);
        let status = agent.wait_exit(Duration::from_secs(8)).expect("exited");
        // The handover wait (1 s check interval, checks of nothing, 2 s),
        // then 2 s at most.
        let bound = Duration::from_secs(3) + Duration::from_secs(2);
        assert!(sent.elapsed() < bound, "SIG{signal}: took {:?}", sent.elapsed());
        assert_eq!(status.code(), Some(0), "SIG{signal}");
        assert!(agent.logged("Shutting down"), "{}", agent.stderr());
    }
}

#[test]
fn the_final_status_says_shutting_down_unless_disabled() {
    for (flag, published) in [(None, true), (Some("--no-final-status"), false)] {
        let server = FakeApiServer::start(TOKEN);
        let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
        let mut args = vec!["run", "--interval", "60s"];
        args.extend(flag);
        let mut agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(server.port(), &sa));
        server.wait_status_configmap(Duration::from_secs(10)).expect("first write");
        agent.signal("TERM");
        assert_eq!(agent.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()), Some(0));
        let doc = server.status_document("ops", "kube9-operator-status").unwrap();
        let last = (doc["health"].as_str().unwrap(), doc["error"].as_str());
        match published {
            true => assert_eq!(last, ("unhealthy", Some("Shutting down"))),
            false => assert_eq!(last, ("healthy", None)),
        }
    }
}

#[test]
fn sigterm_during_a_hung_api_call_exits_within_the_grace() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.set_sticky_fault(Fault::Hang(Duration::from_secs(30)));
    let mut agent = Run::default_interval().start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || (!server.requests().is_empty()).then_some(()))
        .expect("the first write is in flight");
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    agent.signal("TERM");
    let status = agent.wait_exit(Duration::from_secs(10)).expect("exited");
    assert!(sent.elapsed() < Duration::from_secs(6), "took {:?}", sent.elapsed());
    assert_eq!(status.code(), Some(0));
}

/// The API server hangs only once the signal came: the handover write
/// hangs. The handover wait is granted only after that write went
/// through, so the process still ends within the grace (5 s) of SIGTERM
/// (not the wait plus the grace).
#[test]
fn sigterm_with_a_hung_handover_write_exits_within_the_grace() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let mut agent = Run::default_interval().checks("5s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    server.wait_status_configmap(Duration::from_secs(10)).expect("a first write");
    std::thread::sleep(Duration::from_millis(300));
    server.set_sticky_fault(Fault::Hang(Duration::from_secs(30)));
    let sent = Instant::now();
    agent.signal("TERM");
    let status = agent.wait_exit(Duration::from_secs(15)).expect("exited");
    assert!(sent.elapsed() < Duration::from_secs(6), "took {:?}", sent.elapsed());
    assert_eq!(status.code(), Some(0));
}

/// SIGHUP is a stop like SIGTERM's: the final status, and the publisher
/// lock released in it, so another instance may take over at once.
#[test]
fn sighup_publishes_the_final_status_and_releases_the_lock() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let mut env = pod_env(server.port(), &sa);
    env.push(("POD_NAME".into(), "pod-a".into()));
    let mut agent = Run::every("60s").checks("1s").start(&opstatus_bin(), &env);
    server.wait_status_configmap(Duration::from_secs(10)).expect("first write");
    let holder = |cm: &serde_json::Value| {
        let record = cm["metadata"]["annotations"]["opstatus.kube9.dev/publisher"].as_str().unwrap_or_default();
        let record: serde_json::Value = serde_json::from_str(record).unwrap_or_default();
        record["holderIdentity"].as_str().map(String::from)
    };
    let cm = || server.object("ops", "kube9-operator-status").unwrap_or_default();
    let held = wait_for(Duration::from_secs(10), Duration::from_millis(20), || holder(&cm()).filter(|h| h == "pod-a"));
    assert!(held.is_some(), "held while running: {}", cm());
    agent.signal("HUP");
    let status = agent.wait_exit(Duration::from_secs(10)).expect("exited");
    assert_eq!(status.code(), Some(0), "{}", agent.stderr());
    let cm = server.object("ops", "kube9-operator-status").unwrap();
    let doc = server.status_document("ops", "kube9-operator-status").unwrap();
    assert_eq!((doc["health"].as_str(), doc["error"].as_str()), (Some("unhealthy"), Some("Shutting down")));
    assert_eq!(holder(&cm).as_deref(), Some(""), "the lock is released");
}

#[test]
fn prestop_tells_the_running_agent_its_pod_is_stopping_and_the_final_status_still_follows_sigterm() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let args = ["run", "--interval", "2s", "--check-interval", "1s", "--listen", &listen];
    let mut agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(server.port(), &sa));
    server.wait_status_configmap(Duration::from_secs(10)).expect("first write");
    // kubelet's preStop hook: exec'd in the pod, it asks over 127.0.0.1.
    let hook = support::run_to_end(&opstatus_bin(), &["prestop", "--listen", &listen], &[], Duration::from_secs(10));
    assert_eq!(hook.status.code(), Some(0), "{}", String::from_utf8_lossy(&hook.stderr));
    let told = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        agent.stderr().contains("Nobody took the status over: publishing on").then_some(())
    });
    assert!(told.is_some(), "alone, it hands over to nobody and publishes on:\n{}", agent.stderr());
    assert!(agent.logged("The pod is stopping: handing the status over"), "{}", agent.stderr());
    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()), Some(0), "{}", agent.stderr());
    let doc = server.status_document("ops", "kube9-operator-status").unwrap();
    assert_eq!((doc["health"].as_str(), doc["error"].as_str()), (Some("unhealthy"), Some("Shutting down")));
    // Nobody listening: exit 1, saying where it tried.
    let nobody = support::run_to_end(&opstatus_bin(), &["prestop", "--listen", &listen], &[], Duration::from_secs(10));
    assert_eq!(nobody.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nobody.stderr).contains(&format!("cannot tell opstatus at {listen}")));
}
