//! SIGTERM and SIGINT stop the agent promptly with exit code 0 (it may run
//! as PID 1, where no default handler would).

mod support;

use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-shutdown-tests";

#[test]
fn sigterm_and_sigint_exit_0_within_two_seconds() {
    for signal in ["TERM", "INT"] {
        let server = FakeApiServer::start(TOKEN);
        let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
        let mut agent =
            RunningAgent::start(&opstatus_bin(), &["run", "--interval", "60s"], &pod_env(server.port(), &sa));
        wait_for(Duration::from_secs(10), Duration::from_millis(50), || server.object("ops", "kube9-operator-status"))
            .expect("first write");
        let sent = Instant::now();
        agent.signal(signal);
        let status = agent.wait_exit(Duration::from_secs(5)).expect("exited");
        assert!(sent.elapsed() < Duration::from_secs(2), "SIG{signal}: took {:?}", sent.elapsed());
        assert_eq!(status.code(), Some(0), "SIG{signal}");
        assert!(agent.stderr().contains("Shutting down"), "{}", agent.stderr());
    }
}
