//! An in-process kube9-server: `POST /v1/operator/register` over HTTPS, with
//! switchable answers (200, 401, 429 + Retry-After, 500, hang, closed
//! connection, malformed JSON, huge body, any code and JSON body). Listens on 127.0.0.1, stops when
//! dropped, and records every request (the tests check the body and that
//! the key only ever travels in the Authorization header).

use super::https::{HttpsServer, Recorded, Reply, Response};
use super::pki::{self, TestPki};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server answers registrations.
#[derive(Clone, Debug)]
pub enum Answer {
    Registered {
        cluster_id: String,
        status_interval_seconds: u64,
    },
    Unauthorized,
    RateLimited {
        retry_after: String,
    },
    ServerError,
    Hang(Duration),
    Close,
    Malformed,
    Huge,
    /// Any answer: code, JSON body, `Retry-After`.
    Raw {
        code: u16,
        body: serde_json::Value,
        retry_after: Option<String>,
    },
}

/// The name kube9-server's certificate carries besides 127.0.0.1.
pub const NAME: &str = "kube9.opstatus.test";

pub struct FakeKube9 {
    pub pki: TestPki,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    server: HttpsServer,
}

impl FakeKube9 {
    pub fn start(answer: Answer) -> FakeKube9 {
        let pki = pki::generate("fake-kube9-ca", &["127.0.0.1", NAME]);
        let answer = Arc::new(Mutex::new(answer));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (a, r) = (answer.clone(), requests.clone());
        let server = HttpsServer::start(
            &pki,
            Arc::new(move |request: &Recorded| {
                r.lock().unwrap().push(request.clone());
                if request.method != "POST" || request.path != "/v1/operator/register" {
                    return answer_json(404, json!({"error": "NOT_FOUND"}));
                }
                match a.lock().unwrap().clone() {
                    Answer::Registered { cluster_id, status_interval_seconds } => answer_json(
                        200,
                        json!({"status": "registered", "clusterId": cluster_id, "tier": "pro",
                           "configuration": {"statusUpdateIntervalSeconds": status_interval_seconds, "reregistrationIntervalHours": 24}}),
                    ),
                    Answer::Unauthorized => {
                        answer_json(401, json!({"error": "INVALID_API_KEY", "message": "API key is not valid"}))
                    }
                    Answer::RateLimited { retry_after } => Reply::Answer(Response {
                        code: 429,
                        body: br#"{"error":"RATE_LIMITED"}"#.to_vec(),
                        retry_after: Some(retry_after),
                    }),
                    Answer::ServerError => answer_json(500, json!({"error": "INTERNAL"})),
                    Answer::Hang(d) => Reply::Hang(d),
                    Answer::Close => Reply::Close,
                    Answer::Malformed => {
                        Reply::Answer(Response { code: 200, body: b"{\"clusterId\": ".to_vec(), retry_after: None })
                    }
                    Answer::Raw { code, body, retry_after } => {
                        Reply::Answer(Response { code, body: body.to_string().into_bytes(), retry_after })
                    }
                    Answer::Huge => {
                        Reply::Answer(Response { code: 200, body: vec![b' '; 8 * 1024 * 1024], retry_after: None })
                    }
                }
            }),
        );
        FakeKube9 { pki, answer, requests, server }
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.server.addr.port())
    }

    /// The URL by the name its certificate also carries, [`NAME`] (which
    /// resolves nowhere: reach it through a proxy, or `connect_proxy::with_hosts`).
    pub fn url_named(&self) -> String {
        format!("https://{NAME}:{}", self.server.addr.port())
    }

    pub fn set_answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer_json(code: u16, body: serde_json::Value) -> Reply {
    Reply::Answer(Response { code, body: body.to_string().into_bytes(), retry_after: None })
}
