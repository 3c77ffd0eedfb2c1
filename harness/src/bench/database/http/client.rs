//! The service on a loopback port for one scenario, the keys issued for
//! every actor of its world, and the HTTP request a call becomes (or why it
//! is made on the gate directly).
//!
//! Guarantees: a call is sent over the wire only when the wire can express
//! it the same way (see the engine's guarantees); path segments are
//! percent-encoded and a header is sent only as the service reads it.

use super::*;

/// A key issued for the run, by tenant and actor.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) token: String,
    pub(super) human: bool,
    /// A human who may change prices, policy and delegations.
    pub(super) admin: bool,
}

/// The service on a loopback port, with the run's keys and an HTTP client.
pub(super) struct Wire {
    pub(super) base: String,
    pub(super) client: reqwest::Client,
    pub(super) keys: BTreeMap<(String, String), Held>,
    pub(super) shutdown: Option<oneshot::Sender<()>>,
    pub(super) task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// One HTTP request, ready to send.
#[derive(Debug, Clone)]
pub(super) struct Req {
    pub(super) method: Method,
    pub(super) path: String,
    pub(super) body: Vec<u8>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) token: Option<String>,
    /// The decision kind of an allowed call (`allow` for approve and propose).
    pub(super) allow_kind: DecisionKind,
    pub(super) propose: bool,
}

/// What a call came to.
pub(super) enum Via {
    /// The request, when the wire can express the call the same way.
    Wire(Req),
    /// Made on the gate directly, and why.
    Direct(&'static str),
}

/// The service's answer, read back.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) body: Value,
}

impl Answer {
    pub(super) fn reason_text(&self) -> Option<&str> {
        self.body.get("reason").and_then(Value::as_str)
    }

    /// The gate's decision the answer carries, if it carries one.
    pub(super) fn decision(&self) -> Option<Decision> {
        let reason = self.reason_text().map(str::parse::<gate::Reason>);
        match (self.body.get("decision").and_then(Value::as_str), reason) {
            (Some("allow"), None) => Some(Decision::Allow),
            (Some("step_up"), Some(Ok(r))) => Some(Decision::StepUp(r)),
            (Some("deny"), Some(Ok(r))) => Some(Decision::Deny(r)),
            _ => None,
        }
    }

    pub(super) fn text(&self, key: &str) -> Option<String> {
        self.body
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// A path segment, percent-encoded (everything but unreserved characters).
pub(super) fn segment(id: &str) -> String {
    let mut out = String::new();
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether the service reads `value` as a header it takes once: 1 to 255
/// visible ASCII characters (`wire::routes::single_header`).
pub(super) fn header_ok(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= wire::MAX_HEADER_CHARS
        && value.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

impl Wire {
    pub(super) async fn start(gate: Arc<Gate<InProcessProvider>>, world: &World) -> Result<Wire> {
        let now = gate.now();
        let mut keys = BTreeMap::new();
        for tenant in &world.tenants {
            for agent in &tenant.agents {
                let k = gate.issue_key(&tenant.id, agent, now).await?;
                keys.insert(
                    (tenant.id.clone(), agent.clone()),
                    Held {
                        token: k.token,
                        human: false,
                        admin: false,
                    },
                );
            }
            for person in &tenant.people {
                let k = gate.issue_key(&tenant.id, &person.id, now).await?;
                keys.insert(
                    (tenant.id.clone(), person.id.clone()),
                    Held {
                        token: k.token,
                        human: true,
                        admin: person.may_approve || person.is_operator,
                    },
                );
            }
        }
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(wire::serve(
            listener,
            gate,
            wire::WireConfig::default(),
            async move {
                let _ = rx.await;
            },
        ));
        Ok(Wire {
            base,
            client: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(60))
                .build()?,
            keys,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    pub(super) async fn stop(mut self) -> Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.context("the server task")?.context("serving")?;
        }
        Ok(())
    }

    pub(super) fn held(&self, tenant: &str, actor: &str) -> Option<&Held> {
        self.keys.get(&(tenant.to_string(), actor.to_string()))
    }

    /// A human key of `tenant` that may administer it, preferring `actor`'s.
    pub(super) fn admin(&self, tenant: &str, actor: Option<&str>) -> Option<(String, String)> {
        if let Some(a) = actor
            && let Some(h) = self.held(tenant, a).filter(|h| h.admin)
        {
            return Some((a.to_string(), h.token.clone()));
        }
        self.keys
            .iter()
            .find(|((t, _), h)| t == tenant && h.admin)
            .map(|((_, a), h)| (a.clone(), h.token.clone()))
    }

    /// A key of `actor`, in `tenant` if it is there, else in any tenant.
    pub(super) fn key_of(&self, tenant: &str, actor: &str) -> Option<(String, &Held)> {
        self.held(tenant, actor)
            .map(|h| (tenant.to_string(), h))
            .or_else(|| {
                self.keys
                    .iter()
                    .find(|((_, a), _)| a == actor)
                    .map(|((t, _), h)| (t.clone(), h))
            })
    }

    /// How `call` goes to the gate: as which request, or directly and why.
    pub(super) fn via(&self, call: &Call) -> Via {
        match (self.route(call), self.credential(call)) {
            (Ok(mut req), Ok(token)) => {
                req.token = token;
                Via::Wire(req)
            }
            (Err(why), _) | (_, Err(why)) => Via::Direct(why),
        }
    }

    /// The good key that makes `call` as the step wrote it (`None`: the
    /// route takes no key), or why no key does.
    pub(super) fn credential(&self, call: &Call) -> Result<Option<String>, &'static str> {
        let human = |tenant: &str, actor: &str, why| {
            self.held(tenant, actor)
                .filter(|h| h.human)
                .map(|h| Some(h.token.clone()))
                .ok_or(why)
        };
        match call {
            Call::Propose { tenant, actor, .. } => self
                .held(tenant, actor)
                .filter(|h| !h.human)
                .map(|h| Some(h.token.clone()))
                .ok_or("proposals by an actor that is no agent of the tenant"),
            Call::Approve {
                tenant, approver, ..
            } => human(
                tenant,
                approver,
                "approvals by an actor that is no human of the tenant",
            ),
            Call::Checkout { tenant, actor, .. } => human(
                tenant,
                actor,
                "checkouts by an actor that is no human of the tenant",
            ),
            Call::Cancel { tenant, actor, .. } => human(
                tenant,
                actor,
                "cancels by an agent or a stranger (a human route)",
            ),
            Call::Pay { tenant, actor, .. } => match actor {
                Some(a) => human(
                    tenant,
                    a,
                    "payments by an agent or a stranger (a human route)",
                ),
                None => Err("payments by the requesting agent (a human route)"),
            },
            Call::Revoke { tenant, actor, .. } => human(
                tenant,
                actor,
                "revocations by an actor that is no human of the tenant",
            ),
            Call::Grant { tenant, caller, .. } => self
                .held(tenant, caller)
                .filter(|h| h.admin)
                .map(|h| Some(h.token.clone()))
                .ok_or("grants by an actor who may not administer the tenant"),
            Call::SetPrice { tenant, .. } | Call::SetPolicy { tenant, .. } => self
                .admin(tenant, None)
                .map(|(_, t)| Some(t))
                .ok_or("price and policy changes in a tenant with no administrator key"),
            _ => Ok(None),
        }
    }

    /// The route, body and headers of `call`, without a credential; why not
    /// when the wire cannot carry it as written.
    pub(super) fn route(&self, call: &Call) -> Result<Req, &'static str> {
        let req = |method: Method, path: String, body: Vec<u8>, allow_kind| Req {
            method,
            path,
            body,
            headers: Vec::new(),
            token: None,
            allow_kind,
            propose: false,
        };
        let json = |v: Value| v.to_string().into_bytes();
        Ok(match call {
            Call::Propose { body, key, .. } => {
                let mut r = req(
                    Method::POST,
                    "/v1/requests".into(),
                    body.clone(),
                    DecisionKind::Allow,
                );
                r.propose = true;
                if let Some(k) = key {
                    if !header_ok(k) {
                        return Err("idempotency keys no header carries");
                    }
                    r.headers
                        .push((wire::IDEMPOTENCY_KEY.to_string(), k.clone()));
                }
                r
            }
            Call::Approve { request, .. } => req(
                Method::POST,
                format!("/v1/requests/{}/approve", segment(request)),
                Vec::new(),
                DecisionKind::Allow,
            ),
            Call::Checkout { request, .. } => req(
                Method::POST,
                format!("/v1/requests/{}/checkout", segment(request)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Cancel { request, .. } => req(
                Method::POST,
                format!("/v1/requests/{}/cancel", segment(request)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Pay { authority, .. } => req(
                Method::POST,
                format!("/v1/authorities/{}/pay", segment(authority)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Revoke { delegation, .. } => req(
                Method::POST,
                format!("/v1/delegations/{}/revoke", segment(delegation)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Grant { parent, hop, .. } => {
                // The service's grantor is the caller (the key's actor), or
                // the `parent` the body names.
                let mut body = json!({
                    "id": hop.id, "to": hop.to, "budget_paise": hop.budget_paise,
                });
                if let Some(parent) = parent {
                    body["parent"] = json!(parent);
                }
                if let Some(skus) = &hop.skus {
                    body["skus"] = json!(skus);
                }
                if let Some(at) = &hop.expires_at {
                    body["expires_at"] = json!(at);
                }
                req(
                    Method::POST,
                    "/v1/delegations".into(),
                    json(body),
                    DecisionKind::Ok,
                )
            }
            Call::SetPrice { sku, price, .. } => req(
                Method::PUT,
                format!("/v1/catalog/{}/price", segment(sku)),
                json(json!({ "price_paise": price })),
                DecisionKind::Ok,
            ),
            Call::SetPolicy { signed, .. } => req(
                Method::PUT,
                "/v1/policy".into(),
                serde_json::to_vec(signed).map_err(|_| "mandates that do not serialize")?,
                DecisionKind::Ok,
            ),
            Call::Webhook {
                body,
                signature,
                event_id,
            } => {
                let mut r = req(
                    Method::POST,
                    "/webhooks/razorpay".into(),
                    body.clone(),
                    DecisionKind::Ok,
                );
                if let Some(s) = signature {
                    // What HTTP carries as written (no edge spaces); the gate judges it.
                    if !s.bytes().all(|b| b == b' ' || (0x21..=0x7e).contains(&b))
                        || s.starts_with(' ')
                        || s.ends_with(' ')
                    {
                        return Err("signatures no header carries as written");
                    }
                    r.headers.push((wire::SIGNATURE.to_string(), s.clone()));
                }
                if let Some(e) = event_id {
                    if !header_ok(e) {
                        return Err("event ids no header carries");
                    }
                    r.headers.push((wire::EVENT_ID.to_string(), e.clone()));
                }
                r
            }
            Call::Login { .. } => {
                return Err("statements of the stolen database login (on the served gate's login)");
            }
            _ => {
                return Err(
                    "operations that are not agent or human calls (sweep, provider, clock)",
                );
            }
        })
    }

    pub(super) async fn send(&self, req: &Req) -> Result<Answer> {
        let mut r = self
            .client
            .request(req.method.clone(), format!("{}{}", self.base, req.path))
            .body(req.body.clone());
        let has = |name: &str| {
            req.headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        if !has("content-type") {
            r = r.header("content-type", "application/json");
        }
        if let Some(token) = &req.token {
            r = r.header("authorization", format!("Bearer {token}"));
        }
        // An empty value is a header the step removed: not sent at all.
        for (k, v) in req.headers.iter().filter(|(_, v)| !v.is_empty()) {
            r = r.header(k.as_str(), v.as_str());
        }
        let answer = r.send().await.context("sending a request to the service")?;
        let status = answer.status().as_u16();
        let bytes = answer
            .bytes()
            .await
            .context("reading the service's answer")?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Answer { status, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("req_0001-a.b~c"), "req_0001-a.b~c");
        assert_eq!(segment("a/b c?d#e%"), "a%2Fb%20c%3Fd%23e%25");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn only_what_the_service_reads_once_is_a_header() {
        assert!(header_ok("evt_1"));
        assert!(!header_ok(""));
        assert!(!header_ok("a b"));
        assert!(!header_ok(&"x".repeat(256)));
        assert!(header_ok(&"x".repeat(255)));
    }
}
