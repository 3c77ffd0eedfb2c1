//! Payment request rows: recording a proposal and moving it through its states.
//!
//! Guarantees: a request is inserted in the state it is born in
//! ([`Birth`]): DENIED or PENDING_APPROVAL when its first decision refused it
//! or asked for a human (states that hold no money), AUTHORIZED holding the
//! reservation its proposal took in the same transaction, and from there it
//! is moved by a typed [`Transition`] from the state it was locked in to the
//! next; [`Transition::apply`] is the one function that
//! changes a stored request's state, the move to NEEDS_REVIEW included. Leaving a reserving
//! state (AUTHORIZED, CHECKOUT_ISSUED, PROVIDER_PENDING, CAPTURED) for any
//! other releases the daily and the delegation budget together with the
//! state change; entering AUTHORIZED records the reservation just taken;
//! entering NEEDS_REVIEW counts the late payment on top of what the request
//! held and records the state it had ended in (`CAPTURED_AFTER_<state>`).
//! The database's `request_state_transition` and
//! `ck_request_reservation_matches_state` refuse anything else.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use super::budget::{self, Reservation};
use super::error::{Ctx, ServiceError};
use super::ledger::{self, Entry, LedgerKey, Queued};
use super::rows::{REQUEST_COLUMNS, RequestRow};
use crate::catalog::Purchase;
use crate::ident::is_ident;
use crate::proposal::PurchaseProposal;
use crate::reason::{Decision, Reason};
use crate::request_state::RequestState;

/// A proposal about to be recorded.
pub(crate) struct NewRequest<'a> {
    /// Drawn by [`new_id`] before the row exists, so that the ledger entries
    /// naming it are hashed before the statement that writes both.
    pub id: &'a str,
    pub tenant: &'a str,
    pub agent: &'a str,
    pub idempotency_key: Option<&'a str>,
    pub body_sha256: &'a str,
    /// The body exactly as received, kept beside the request when it is
    /// within the tool boundary's limit ([`crate::proposal::MAX_BODY_BYTES`]);
    /// a longer body is refused and only its digest is kept.
    pub body: Option<&'a [u8]>,
    pub proposal: Option<&'a PurchaseProposal>,
    pub purchase: Option<&'a Purchase>,
    pub decision: Decision,
    pub policy_version: Option<i32>,
    pub born: Birth<'a>,
    pub now: DateTime<Utc>,
    /// The key of the row's MAC ([`ledger::RequestTerms`]), computed here
    /// and written by the insert itself.
    pub mac_key: &'a LedgerKey,
}

/// A new request's id: `req_` and 128 bits from the system's random source
/// in lower-case hex, the shape of the column's default (a random UUID's
/// hex), so ids drawn here and by the database never collide in practice
/// and reveal nothing of how many requests there are.
pub(crate) fn new_id() -> Result<String, ServiceError> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits).map_err(ServiceError::Randomness)?;
    Ok(format!("req_{}", hex::encode(bits)))
}

/// The state a request is inserted in: its first decision's. The database's
/// `request_state_transition` refuses any later state as a birth state, and
/// `ck_request_reservation_matches_state` an AUTHORIZED birth that does not
/// hold its whole amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Birth<'a> {
    /// Allowed, holding this reservation, taken earlier in the same
    /// transaction.
    Authorized(&'a Reservation),
    /// Refused by its first decision, for this reason.
    Denied(Reason),
    /// Its first decision asked for a human.
    PendingApproval,
}

impl<'a> Birth<'a> {
    /// The state and the refusal recorded with it.
    fn columns(self) -> (RequestState, Option<&'static str>) {
        match self {
            Birth::Authorized(_) => (RequestState::Authorized, None),
            Birth::Denied(reason) => (RequestState::Denied, Some(reason.code())),
            Birth::PendingApproval => (RequestState::PendingApproval, None),
        }
    }

    /// What the request holds from birth: nothing, or the reservation.
    fn reservation(self) -> Option<&'a Reservation> {
        match self {
            Birth::Authorized(r) => Some(r),
            Birth::Denied(_) | Birth::PendingApproval => None,
        }
    }
}

/// Inserts the request in its birth state, and its body's bytes (when
/// kept) in `request_bodies`, and returns it. Given `ledger` (the
/// operation's entries), the entries are queued with the request in the
/// same statement.
pub(crate) async fn insert(
    conn: &mut PgConnection,
    new: &NewRequest<'_>,
    ledger: Option<&Queued>,
) -> Result<RequestRow, ServiceError> {
    let quantity = new
        .proposal
        .map(|p| i32::try_from(p.quantity))
        .transpose()
        .map_err(|_| ServiceError::Corrupt {
            what: "a quantity past the boundary's limit reached the database".to_owned(),
        })?;
    // A sku that is not an identifier is unknown, and is never stored.
    let sku = new
        .proposal
        .map(|p| p.sku.as_str())
        .filter(|sku| is_ident(sku));
    let digest = new.purchase.map(Purchase::digest);
    let row_mac = ledger::RequestTerms {
        tenant: new.tenant,
        id: new.id,
        agent: new.agent,
        sku,
        quantity,
        merchant: new.purchase.map(|p| p.merchant.as_str()),
        amount_paise: new.purchase.map(|p| p.amount_paise),
        currency: new.purchase.map(|p| p.currency.as_str()),
        digest: digest.as_deref(),
        policy_version: new.policy_version,
        standing: new.decision.kind(),
    }
    .mac(new.mac_key);
    // The request's parameters come after the ledger's, when it carries them.
    let first = if ledger.is_some() { Queued::PARAMS } else { 0 };
    let values = (1..=22)
        .map(|n| format!("${}", first + n))
        .collect::<Vec<_>>()
        .join(", ");
    let insert = format!(
        "INSERT INTO payment_requests (id, tenant_id, agent_id, idempotency_key, body_sha256, sku, \
         quantity, purpose, merchant_id, currency, amount_paise, purchase_digest, decision, reason, \
         state, state_reason, policy_version, reserved_paise, reserved_day, delegation_id, \
         authorized_at, created_at, updated_at, row_mac) \
         VALUES ({values}, ${}, ${}) RETURNING {REQUEST_COLUMNS}",
        first + 22,
        first + 24
    );
    // The body's bytes ride on the same statement (request_body_matches_digest
    // checks them against the row at the statement's end).
    let kept = format!(
        "kept AS (INSERT INTO request_bodies (tenant_id, request_id, body) \
         SELECT tenant_id, id, ${0}::bytea FROM inserted WHERE ${0}::bytea IS NOT NULL)",
        first + 23
    );
    let sql = match ledger {
        Some(_) => format!(
            "WITH {}, inserted AS ({insert}), {kept} SELECT inserted.* FROM inserted",
            Queued::CTES
        ),
        None => format!("WITH inserted AS ({insert}), {kept} SELECT inserted.* FROM inserted"),
    };
    let (state, state_reason) = new.born.columns();
    let held = new.born.reservation();
    let query = sqlx::query_as::<_, RequestRow>(sqlx::AssertSqlSafe(sql));
    let query = match ledger {
        Some(chained) => chained.bind(query),
        None => query,
    };
    query
        .bind(new.id)
        .bind(new.tenant)
        .bind(new.agent)
        .bind(new.idempotency_key)
        .bind(new.body_sha256)
        .bind(sku)
        .bind(quantity)
        .bind(new.proposal.map(|p| p.purpose.as_str()))
        .bind(new.purchase.map(|p| p.merchant.as_str()))
        .bind(new.purchase.map(|p| p.currency.as_str()))
        .bind(new.purchase.map(|p| p.amount_paise))
        .bind(&digest)
        .bind(new.decision.kind())
        .bind(new.decision.reason().map(Reason::code))
        .bind(state.as_str())
        .bind(state_reason)
        .bind(new.policy_version)
        .bind(held.map_or(0, |r| r.amount_paise))
        .bind(held.map(|r| r.day))
        .bind(held.map(|r| r.delegation_id.as_str()))
        .bind(held.map(|_| new.now))
        .bind(new.now)
        .bind(new.body)
        .bind(&row_mac)
        .fetch_one(conn)
        .await
        .ctx("recording the proposal")
}

/// The request with this id in `tenant`; another tenant's request is
/// answered exactly as a missing one.
pub(crate) async fn find(
    conn: &mut PgConnection,
    tenant: &str,
    id: &str,
) -> Result<Option<RequestRow>, ServiceError> {
    if !is_ident(tenant) || !is_ident(id) {
        return Ok(None);
    }
    let sql =
        format!("SELECT {REQUEST_COLUMNS} FROM payment_requests WHERE tenant_id = $1 AND id = $2");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(id)
        .fetch_optional(conn)
        .await
        .ctx("reading a request")
}

/// The state of the request with this id in `tenant`, `None` when there is
/// none; a stored spelling that is no state is [`ServiceError::Corrupt`].
pub(crate) async fn state_of(
    conn: &mut PgConnection,
    tenant: &str,
    id: &str,
) -> Result<Option<RequestState>, ServiceError> {
    let text: Option<String> =
        sqlx::query_scalar("SELECT state FROM payment_requests WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(id)
            .fetch_optional(conn)
            .await
            .ctx("reading a request's state")?;
    text.map(|t| {
        t.parse().map_err(
            |e: crate::request_state::UnknownState| ServiceError::Corrupt {
                what: e.to_string(),
            },
        )
    })
    .transpose()
}

/// How a transition changes what the request holds.
#[derive(Debug, Clone, Copy)]
enum Hold<'a> {
    /// Keep the reservation the row already has when the new state reserves;
    /// release it (daily and delegation budget) when it does not.
    Keep,
    /// The reservation just taken (entering AUTHORIZED).
    Take(&'a Reservation),
    /// Count money that moved after the request ended on top of what the row
    /// holds, on the same day and hop (entering NEEDS_REVIEW).
    Count(i64),
}

/// Why a request moved, as `state_reason` records it.
#[derive(Debug, Clone, Copy)]
enum Note {
    None,
    /// A refusal: replaces any earlier reason.
    Reason(Reason),
    /// A payment captured after the request ended in the state it moves
    /// from: an earlier reason, if any, is kept.
    CapturedAfter,
}

/// One move of a LOCKED request from the state it was read in to the next,
/// and what goes with it; [`Transition::apply`] is the only writer of a
/// request's state. Built with [`Transition::new`] (or
/// [`Transition::needs_review`]) and refined with [`Transition::because`],
/// [`Transition::taking`] and [`Transition::under_policy`].
#[must_use = "a transition does nothing until it is applied"]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Transition<'a> {
    request: &'a RequestRow,
    /// The state the request was locked in.
    pub from: RequestState,
    pub to: RequestState,
    note: Note,
    hold: Hold<'a>,
    policy_version: Option<i32>,
    row_mac: Option<&'a str>,
}

impl<'a> Transition<'a> {
    /// `request` moves to `to`, keeping or releasing its reservation as `to`
    /// demands.
    pub fn new(request: &'a RequestRow, to: RequestState) -> Self {
        Transition {
            request,
            from: request.state,
            to,
            note: Note::None,
            hold: Hold::Keep,
            policy_version: None,
            row_mac: None,
        }
    }

    /// Money was captured for `request` after it had ended (or was captured
    /// already): it moves to NEEDS_REVIEW with `counted_paise` counted where
    /// its reservation was, and the state it ended in is recorded.
    pub fn needs_review(request: &'a RequestRow, counted_paise: i64) -> Self {
        Transition {
            note: Note::CapturedAfter,
            hold: Hold::Count(counted_paise),
            ..Transition::new(request, RequestState::NeedsReview)
        }
    }

    /// The refusal that moves it.
    pub fn because(self, reason: Reason) -> Self {
        Transition {
            note: Note::Reason(reason),
            ..self
        }
    }

    /// It now holds `reservation`, just taken (entering AUTHORIZED).
    pub fn taking(self, reservation: &'a Reservation) -> Self {
        Transition {
            hold: Hold::Take(reservation),
            ..self
        }
    }

    /// It was decided under this policy version (when `Some`).
    pub fn under_policy(self, version: Option<i32>) -> Self {
        Transition {
            policy_version: version,
            ..self
        }
    }

    /// The request's MAC is rewritten to `mac`: its terms under the standing
    /// the move gives it (entering AUTHORIZED by approval).
    pub fn sealed(self, mac: &'a str) -> Self {
        Transition {
            row_mac: Some(mac),
            ..self
        }
    }

    /// Writes the move; releases the reservation when `to` holds none. The
    /// database's `request_state_transition` and
    /// `ck_request_reservation_matches_state` refuse a move they do not allow.
    pub async fn apply(
        self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
    ) -> Result<(), ServiceError> {
        self.write(conn, now, None).await.map(|_| ())
    }

    /// Writes the move as [`Transition::apply`] does, then queues `entries`
    /// for the ledger: the operation's last writes, before its commit. When
    /// every entry is the request's tenant's, the entries ride on the move's
    /// statement ([`Queued::CTES`]: one round trip for both); otherwise they
    /// are appended after it.
    pub async fn apply_recording(
        self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
        key: &LedgerKey,
        entries: Vec<Entry>,
    ) -> Result<(), ServiceError> {
        let tenant = self.request.tenant_id.as_str();
        let carried = match self.hold {
            Hold::Count(_) => None,
            Hold::Keep | Hold::Take(_)
                if entries.iter().all(|e| e.tenant.as_deref() == Some(tenant)) =>
            {
                Some(Queued::new(key, tenant, now, &entries)?)
            }
            Hold::Keep | Hold::Take(_) => None,
        };
        if self.write(conn, now, carried.as_ref()).await? {
            return Ok(());
        }
        ledger::append(conn, key, now, entries).await
    }

    /// Writes the move, carrying `ledger` when given; returns whether it
    /// carried them (a move to NEEDS_REVIEW carries none).
    async fn write(
        self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
        ledger: Option<&Queued>,
    ) -> Result<bool, ServiceError> {
        let request = self.request;
        let note = match self.note {
            Note::None => None,
            Note::Reason(reason) => Some(reason.code().to_owned()),
            Note::CapturedAfter => Some(format!("CAPTURED_AFTER_{}", self.from)),
        };
        let (reserved, day, hop) = match self.hold {
            Hold::Count(counted) => {
                sqlx::query(
                    "UPDATE payment_requests SET state = $3, reserved_paise = reserved_paise + $4, \
                     state_reason = COALESCE(state_reason, $5), updated_at = $6 \
                     WHERE tenant_id = $1 AND id = $2",
                )
                .bind(&request.tenant_id)
                .bind(&request.id)
                .bind(self.to.as_str())
                .bind(counted)
                .bind(note)
                .bind(now)
                .execute(conn)
                .await
                .ctx("moving a request to NEEDS_REVIEW")?;
                return Ok(false);
            }
            Hold::Take(r) => (r.amount_paise, Some(r.day), Some(r.delegation_id.clone())),
            Hold::Keep if self.to.reserves() => (
                request.reserved_paise,
                request.reserved_day,
                request.delegation_id.clone(),
            ),
            Hold::Keep => {
                budget::release(conn, request).await?;
                (0, request.reserved_day, request.delegation_id.clone())
            }
        };
        // The move's parameters come after the ledger's, when it carries them.
        let first = if ledger.is_some() { Queued::PARAMS } else { 0 };
        let n = |k: usize| format!("${}", first + k);
        let update = format!(
            "UPDATE payment_requests SET state = {s}, state_reason = COALESCE({note}, state_reason), \
             reserved_paise = {reserved}, reserved_day = {day}, delegation_id = {hop}, \
             policy_version = COALESCE({version}, policy_version), updated_at = {now}, \
             authorized_at = CASE WHEN {s} = 'AUTHORIZED' THEN {now} ELSE authorized_at END, \
             row_mac = COALESCE({mac}, row_mac) \
             WHERE tenant_id = {tenant} AND id = {id}",
            tenant = n(1),
            id = n(2),
            s = n(3),
            note = n(4),
            reserved = n(5),
            day = n(6),
            hop = n(7),
            version = n(8),
            now = n(9),
            mac = n(10),
        );
        let sql = match ledger {
            Some(_) => format!(
                "WITH {}, updated AS ({update} RETURNING 1) \
                 SELECT (SELECT count(*) FROM queued), (SELECT count(*) FROM updated)",
                Queued::CTES
            ),
            None => format!("{update} RETURNING 0::bigint, 1::bigint"),
        };
        let query = sqlx::query_as::<_, (i64, i64)>(sqlx::AssertSqlSafe(sql));
        let query = match ledger {
            Some(chained) => chained.bind(query),
            None => query,
        };
        let answer = query
            .bind(&request.tenant_id)
            .bind(&request.id)
            .bind(self.to.as_str())
            .bind(note)
            .bind(reserved)
            .bind(day)
            .bind(hop)
            .bind(self.policy_version)
            .bind(now)
            .bind(self.row_mac)
            .fetch_optional(conn)
            .await
            .ctx("moving a request to its next state")?;
        Ok(ledger.is_some() && answer.is_some())
    }
}
