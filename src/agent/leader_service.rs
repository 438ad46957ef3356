//! Who leads, for the leader's Service and `/leader`
//! (`--leader-service`): the operator's Lease as the publisher read it on
//! this check (one read serves both), judged with the clock as the
//! publisher judges it ([`leading`], pure), and handed to the EndpointSlice
//! ([`LeaderEndpoints`]) and to what `/leader` answers. Readiness is never
//! touched: standby pods stay Ready, so rollouts proceed.

use super::leader::Leader;
use crate::endpoint::{LeaderView, Shared};
use crate::kube::Client;
use crate::sinks::leader_endpoints::{LeaderEndpoints, Leading};
use crate::status::Problem;
use std::time::{Duration, Instant};

/// The leader's Service, kept from who leads.
pub(super) struct LeaderService {
    pod: String,
    endpoints: LeaderEndpoints,
}

impl LeaderService {
    pub(super) fn new(pod: String, endpoints: LeaderEndpoints) -> LeaderService {
        LeaderService { pod, endpoints }
    }

    /// One check: from the Lease as last read (`leader`), keeps the slice
    /// and says what `/leader` answers; a slice that cannot be kept is a
    /// problem of the status. `interval`: the heartbeat, how often the
    /// leader checks the slice for drift; failed Lease reads keep the last
    /// answer for one lease of the publisher lock.
    pub(super) fn check(
        &mut self,
        client: &mut Client,
        leader: &Leader,
        now: Instant,
        interval: Duration,
        shared: &Shared,
    ) -> Option<Problem> {
        let grace = crate::lock::lease_duration(interval);
        let leading = leading(leader, now, grace);
        self.endpoints.sync(client, leading, now, interval);
        let view = view(leading, &self.pod, leader, grace);
        shared.lock().unwrap_or_else(|p| p.into_inner()).leader = Some(view);
        self.endpoints.problem()
    }
}

/// Who leads as the Lease tells it at `now`: the pod its holder names while
/// that holder renews; nobody once it names no live leader (unrenewed past
/// its duration and [`super::leader::LEASE_GRACE`], released, gone);
/// unknown before the first read and while reads fail (the last answer
/// stands for `grace`, as for the publisher).
pub(super) fn leading(leader: &Leader, now: Instant, grace: Duration) -> Leading<'_> {
    match leader.decides(now, grace) {
        Some(Ok(holder)) => Leading::Pod(crate::lock::leader_pod(holder)),
        Some(Err(_)) if leader.failure().is_none() => Leading::Nobody,
        None if leader.not_leading(grace).is_some() => Leading::Nobody,
        Some(Err(_)) | None => Leading::Unknown,
    }
}

/// What `/leader` answers in this pod.
fn view(leading: Leading<'_>, me: &str, leader: &Leader, grace: Duration) -> LeaderView {
    let (leads, says) = match leading {
        Leading::Pod(pod) if pod == me => (true, format!("leader: this pod ({me}) leads")),
        Leading::Pod(pod) => (false, format!("not the leader: {pod} leads")),
        Leading::Nobody => {
            let why = leader.not_leading(grace).unwrap_or_else(|| "the operator's Lease names no leader".into());
            (false, format!("no leader: {why}"))
        }
        Leading::Unknown => {
            let why = leader.failure().unwrap_or("the operator's Lease has not been read yet");
            (false, format!("leader unknown: {why}"))
        }
    };
    LeaderView { leads, says }
}

#[cfg(test)]
mod tests {
    use super::super::leader::LeaseRead;
    use super::super::leader::tests::held;
    use super::*;

    const GRACE: Duration = Duration::from_secs(14);
    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn the_lease_names_the_leader_until_it_is_left_unrenewed_then_nobody_leads() {
        let t0 = Instant::now();
        let mut leader = Leader::default();
        assert_eq!(leading(&leader, t0, GRACE), Leading::Unknown, "not read yet");
        leader.observe(held("op-0_1a2b", "2026-11-28T07:00:00Z"), t0);
        assert_eq!(leading(&leader, t0, GRACE), Leading::Pod("op-0"));
        let view = view(leading(&leader, t0, GRACE), "op-0", &leader, GRACE);
        assert_eq!(view, LeaderView { leads: true, says: "leader: this pod (op-0) leads".into() });
        assert_eq!(view_of(&leader, t0, "op-1").says, "not the leader: op-0 leads");
        // Unrenewed: it leads for its 15 s and the 10 s grace, then not.
        leader.observe(held("op-0_1a2b", "2026-11-28T07:00:00Z"), t0 + S(24));
        assert_eq!(leading(&leader, t0 + S(24), GRACE), Leading::Pod("op-0"));
        leader.observe(held("op-0_1a2b", "2026-11-28T07:00:00Z"), t0 + S(25));
        assert_eq!(leading(&leader, t0 + S(25), GRACE), Leading::Nobody);
        let gone = view_of(&leader, t0 + S(25), "op-0");
        assert!(!gone.leads && gone.says.starts_with("no leader: The operator's leader is not renewing"), "{gone:?}");
        // Taken over: the new holder leads at once.
        leader.observe(held("op-1_3c4d", "2026-11-28T07:00:30Z"), t0 + S(30));
        assert_eq!(leading(&leader, t0 + S(30), GRACE), Leading::Pod("op-1"));
    }

    #[test]
    fn a_released_lease_is_nobody_at_once_and_failing_reads_are_unknown_past_the_last_answer() {
        let t0 = Instant::now();
        let mut leader = Leader::default();
        leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 403".into()), t0);
        assert_eq!(leading(&leader, t0, GRACE), Leading::Unknown, "a failure is no answer");
        assert_eq!(view_of(&leader, t0, "op-0").says, "leader unknown: Cannot read Lease ns/l: 403");
        leader.observe(held("op-0_1", "2026-11-28T07:00:00Z"), t0 + S(1));
        leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 503".into()), t0 + S(2));
        assert_eq!(leading(&leader, t0 + S(2), GRACE), Leading::Pod("op-0"), "the last answer stands");
        assert_eq!(leading(&leader, t0 + S(2) + GRACE, GRACE), Leading::Unknown, "past the grace: unknown");
        leader.observe(LeaseRead::NoLeader("Lease ns/l has no holder".into()), t0 + S(40));
        assert_eq!(leading(&leader, t0 + S(40), GRACE), Leading::Nobody, "released: nobody, at once");
    }

    fn view_of(leader: &Leader, now: Instant, me: &str) -> LeaderView {
        view(leading(leader, now, GRACE), me, leader, GRACE)
    }
}
