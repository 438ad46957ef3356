//! One probed collection kept current by list-then-watch, on a thread of
//! its own, so the agent's loop never waits for it.
//!
//! The state machine is client-go's reflector, small ([`Machine`], pure,
//! shared with every watch of opstatus): a list (bounded by the
//! [`Pager`](super::pager::Pager); the first from the API server's watch
//! cache, a later one not older than the version last seen) fills a fresh
//! [`Store`] and gives the `resourceVersion` to watch from; the watch
//! (`allowWatchBookmarks`, `timeoutSeconds` of [`WATCH_SECONDS`] plus up to
//! a minute of jitter) applies each event; when the server ends it, the
//! next watch starts from the last version seen, at once; a broken stream
//! or a refused watch tries again from there after a bounded, jittered
//! backoff; `410 Gone` (the status, or an `ERROR` event with that code)
//! lists again. So with nothing changing a collection costs one request
//! every five minutes or so, however many resources it holds.
//!
//! The thread ([`Watcher`]) owns its own [`Client`] (a sibling of the
//! agent's: same credentials, its own connection), publishes into
//! [`Shared`], and nudges the agent's loop when a resource's verdict
//! changed, so a flip reaches the OperatorCondition without waiting for the
//! next check. Failures are reported in [`Shared::problem`] (the status
//! turns degraded) and the store keeps its last contents; a watch the
//! server ended on schedule, or that reconnected, is no problem.

use super::MAX_RESOURCES;
use super::collection::Collection;
use super::list::Listing;
use super::pager::{OVER_CAP_FIRST, OVER_CAP_MOST, OverCap};
use super::store::{Applied, Store};
use super::{GRANT, percent_encode};
use crate::kube::reflector::{self, Ended, Event, Reflect, SILENCE_MARGIN, WATCH_SECONDS, WatchHealth};
use crate::kube::{Client, Fields, KubeError, Stop, WatchStream, Worker, unreadable};
use crate::util::backoff::Jitter;
use crate::util::shutdown::Nudge;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Up to this many seconds are added to [`WATCH_SECONDS`], so the
/// watches of many instances do not end together.
const WATCH_JITTER_SECONDS: u64 = 60;

/// The shortest time between two lists made to count the condition types
/// that exist ([`Store::types_stale`]): types replaced once (an operator's
/// upgrade) cost one list, types that churn at most one list this often.
const TYPES_RELIST_GAP: Duration = Duration::from_secs(600);

/// What the thread publishes for the agent's checks.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// `None` until the first list completed.
    pub store: Option<Store>,
    /// While the first list runs: the resources it listed so far.
    pub listing: Option<usize>,
    /// Why the collection may be out of date, and since when its watch
    /// is open.
    pub health: WatchHealth,
}

/// The agent's handle on one collection's thread. Dropping it stops the
/// thread at once: it wakes from a wait to retry, and its connection is
/// shut down under the request or watch it may be blocked on (so it holds
/// no API-server connection a moment later); it never starts another
/// request.
pub(crate) struct Watcher {
    pub collection: Collection,
    pub shared: Arc<Mutex<Shared>>,
    _worker: Worker,
}

/// Everything the thread needs.
struct Run {
    client: Client,
    collection: Collection,
    shared: Arc<Mutex<Shared>>,
    stop: Stop,
    nudge: Nudge,
    /// The list under way, kept between tries ([`Listing`]).
    listing: Listing,
    jitter: Jitter,
    /// When the collection was last listed again for its condition types.
    types_relisted: Option<Instant>,
    /// Found past [`MAX_RESOURCES`]: counted, not listed, until it fits.
    over_cap: Option<OverCap>,
}

impl Watcher {
    /// Starts the thread. `client` is the thread's own.
    pub(crate) fn start(
        client: Client,
        collection: Collection,
        nudge: Nudge,
        list_budget: Duration,
    ) -> std::io::Result<Watcher> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (for_thread, thread_collection) = (shared.clone(), collection.clone());
        let worker = Worker::spawn("probe-watch", client, move |client, stop| {
            let mut run = Run {
                client,
                collection: thread_collection,
                shared: for_thread,
                stop,
                nudge,
                listing: Listing::new(list_budget),
                jitter: Jitter::from_os(),
                types_relisted: None,
                over_cap: None,
            };
            reflector::drive(&mut run, &mut Jitter::from_os());
        })?;
        Ok(Watcher { collection, shared, _worker: worker })
    }
}

impl Run {
    /// How many resources the collection holds: one request for one item
    /// (`limit=1`, no version: the latest, from etcd) and the server's
    /// `remainingItemCount`; `None` when it does not say.
    fn count(&mut self) -> Result<Option<u64>, KubeError> {
        let c = &self.collection;
        let action = format!("list {}{}", c.name, c.scope);
        let Some(body) = self.client.get_path(&format!("{}?limit=1", c.path), &action)? else { return Ok(None) };
        // With more than the one item asked for, the server says how many
        // more (v1.15 and later); without, it has one at most, or does not say.
        let remaining = Fields::parse(&body).and_then(|list| list.object("metadata")?.get::<u64>("remainingItemCount"));
        let count = remaining.map(|n| n.map(|n| n + 1));
        count.map_err(|e| unreadable(&format!("the list of {}", c.name), &e))
    }

    /// The collection is past [`MAX_RESOURCES`]: the problem, the same
    /// words whatever the count, so that it is said once.
    fn past_cap(&self) -> Ended {
        let error = format!(
            "Cannot list {}: more than {MAX_RESOURCES} resources (the most probed per type and namespace): not \
             evaluated; counted again (one request) after a wait growing from {} s to {} min",
            self.collection.name,
            OVER_CAP_FIRST.as_secs(),
            OVER_CAP_MOST.as_secs() / 60
        );
        Ended::ListFailed { error, retry_after: None }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Reflect for Run {
    fn stopped(&self) -> bool {
        self.stop.stopped()
    }

    /// The list into a fresh store, which replaces the old one when
    /// complete (until then the last one stands): the first from the
    /// watch cache, a later one from the version last seen (`version`). A list stops only when
    /// it fails or stops making progress ([`Pager`](super::pager::Pager)); a failed
    /// request leaves it to go on from its page at the next try. While
    /// the first list runs, [`Shared::listing`] says how far it got.
    fn list(&mut self, version: &mut String) -> Ended {
        if let Some(over) = self.over_cap {
            while !self.stopped() && Instant::now() < over.due {
                std::thread::park_timeout(over.due.saturating_duration_since(Instant::now()));
            }
            if self.stopped() {
                return self.past_cap();
            }
            match self.count() {
                // Fits now, or the server does not say: list.
                Ok(None) => {}
                Ok(Some(n)) if n <= MAX_RESOURCES as u64 => {}
                counted => {
                    log::debug!("Counted {}: {counted:?}", self.collection.name);
                    self.over_cap = Some(OverCap::after(self.over_cap, Instant::now()));
                    return self.past_cap();
                }
            }
        }
        let first = self.lock().store.is_none();
        let (shared, name) = (self.shared.clone(), &self.collection.name);
        let (started, mut said) = (Instant::now(), Instant::now());
        let mut progress = |listed: usize| {
            if first {
                shared.lock().unwrap_or_else(|p| p.into_inner()).listing = Some(listed);
                if said.elapsed() >= super::LIST_BUDGET {
                    said = Instant::now();
                    log::info!("Listing {name}: {listed} so far (the first list: nothing is said of it until done)");
                }
            }
        };
        let listed = self.listing.run(&mut self.client, &self.collection, version, &mut progress);
        match listed {
            Ok(store) => {
                if first && started.elapsed() >= super::LIST_BUDGET {
                    let (c, took) = (&self.collection, started.elapsed().as_secs());
                    log::info!("Listed {} {}{} in {took} s", store.len(), c.name, c.scope);
                }
                version.clone_from(&store.resource_version);
                self.over_cap = None;
                let mut shared = self.lock();
                shared.store = Some(store);
                shared.listing = None;
                drop(shared);
                self.nudge.nudge();
                Ended::Listed
            }
            Err(_) if self.listing.past_cap() => {
                self.over_cap = Some(OverCap::after(self.over_cap, Instant::now()));
                self.past_cap()
            }
            Err(e) => {
                let retry_after = e.retry_after();
                let at = if self.listing.at_start() {
                    String::new()
                } else {
                    let (listed, pages) = (self.listing.listed(), self.listing.pages());
                    format!(" (the next try goes on from page {} with {listed} listed)", pages + 1)
                };
                Ended::ListFailed {
                    error: format!("Cannot list {}: {}{at}", self.collection.name, e.granted_by(GRANT)),
                    retry_after,
                }
            }
        }
    }

    fn open(&mut self, version: &str) -> Result<WatchStream, KubeError> {
        let seconds = WATCH_SECONDS + self.jitter.next_u64() % (WATCH_JITTER_SECONDS + 1);
        let path = format!(
            "{}?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={seconds}",
            self.collection.path,
            percent_encode(version)
        );
        let action = format!("watch {}{}", self.collection.name, self.collection.scope);
        let lasting = Duration::from_secs(seconds) + SILENCE_MARGIN;
        self.client.watch(&path, &action, lasting).map_err(|e| e.granted_by(GRANT))
    }

    /// Applies the next event to the store (none: listed again), and
    /// lists again when the condition types counted are no longer the
    /// ones the resources carry.
    fn next_event(&mut self, stream: &mut WatchStream, version: &mut String) -> Result<Option<Event>, KubeError> {
        let Some(line) = stream.next_line()? else { return Ok(None) };
        let (applied, types_stale) = {
            let mut shared = self.lock();
            let Some(store) = shared.store.as_mut() else { return Ok(Some(Event::Gone)) };
            let applied = store.apply(line, &self.collection.spec);
            version.clone_from(&store.resource_version);
            (applied, store.types_stale())
        };
        let relist = types_stale && self.types_relisted.is_none_or(|at| at.elapsed() >= TYPES_RELIST_GAP);
        if relist {
            self.types_relisted = Some(Instant::now());
            log::info!(
                "{}: the condition types counted for the metrics are no longer the ones the resources carry: \
                 listing again to count those",
                self.collection.name
            );
        }
        if applied == Applied::Changed && !relist {
            self.nudge.nudge();
        }
        Ok(Some(match applied {
            Applied::Quiet | Applied::Changed => Event::Applied { relist },
            Applied::Gone => Event::Gone,
            Applied::Failed(why) => Event::Failed(why),
        }))
    }

    fn trouble(&self, why: &dyn std::fmt::Display) -> String {
        format!("Cannot watch {}: {why}", self.collection.name)
    }

    fn health<R>(&self, f: impl FnOnce(&mut WatchHealth) -> R) -> R {
        f(&mut self.lock().health)
    }

    fn reported(&self, problem: &Option<String>) {
        match problem {
            Some(e) => log::debug!("Probe of {}: {e}", self.collection.name),
            None => log::debug!("Probe of {}: listing and watching work again", self.collection.name),
        }
        self.nudge.nudge();
    }
}
