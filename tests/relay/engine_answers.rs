//! What the engine's answers come to, driven through one thread's dispatcher without sockets.
//! The bundle-status calls a bot makes, answered from the relay's record of its bundles: Jito's
//! getInflightBundleStatuses (its shape, with the relay's own view of what failed) and the
//! relay's getBundleDelivery (every send, the address it left from, the engine's answer).
//! Then an engine that throttles everyone ("Network congested. Endpoint is globally rate
//! limited.", RESOURCE_EXHAUSTED with no wait), which is not one source's cooldown: another
//! address would be throttled too. The whole region backs off (100 ms, doubling while it keeps
//! saying so, back to 100 ms once a call is accepted; for the wait the answer names, where it
//! names one, exactly), the address keeps its place, and the bundle goes once the back-off ends.

use crate::dispatcher_support;
use crate::h2_support;

use bundle_relay::clock::Instant;
use bundle_relay::jito::GLOBAL_THROTTLE_MESSAGE;
use bundle_relay::relay::intake::{self, Port, Verdict};
use bundle_relay::relay::tenancy::Claim;
use dispatcher_support::{MS, Sim, body, one_region};
use serde_json::Value;

/// Posts `body` as a bot would and returns the JSON-RPC answer.
fn call(t: &mut Sim, body: &str, now: Instant) -> (Verdict, Value) {
    let v = t.post_as(Port::Pinned(0), Claim::LOOPBACK, "", body, now);
    let text = t.response();
    let json = text.split("\r\n\r\n").nth(1).expect("a body");
    (v, serde_json::from_str(json).expect("JSON"))
}

/// The bundle id sendBundle answered for bundle `seed`.
fn send(t: &mut Sim, seed: u64, now: Instant) -> String {
    let (v, answer) = call(t, &body(seed), now);
    assert_eq!(v, Verdict::Admitted, "{answer}");
    answer["result"]
        .as_str()
        .expect("the bundle id")
        .to_string()
}

/// Bundle `seed` posted at `now`, sent on the one pair and taken by the engine: its id.
fn taken(t: &mut Sim, seed: u64, now: Instant) -> String {
    let id = send(t, seed, now);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "sent");
    t.answer(now);
    id
}

/// A bot's getInflightBundleStatuses for `id`, which the relay asks an engine about (its
/// answer waits for the engine's); the relay's answer is in the panic message otherwise.
fn asked_of_an_engine(t: &mut Sim, id: &str, now: Instant) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"getInflightBundleStatuses","params":[["{id}"]]}}"#
    );
    assert_eq!(
        t.post(&body, now),
        Verdict::Deferred,
        "an engine is asked: {}",
        t.response()
    );
}

fn inflight(t: &mut Sim, ids: &[&str], now: Instant) -> Value {
    let list: Vec<String> = ids.iter().map(|i| format!("\"{i}\"")).collect();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"getInflightBundleStatuses","params":[[{}]]}}"#,
        list.join(",")
    );
    let (v, answer) = call(t, &body, now);
    assert_eq!(v, Verdict::Answered, "{answer}");
    answer
}

/// The answer to the status query the dispatcher answered last (it gave up waiting), as the
/// bot reads it.
fn deferred_answer(t: &mut Sim, now: Instant) -> Value {
    let (_, q) = t.d.poll_answered().expect("given up waiting");
    let mut out = vec![0u8; 16 * 1024];
    let (n, verdict) = intake::write_answer(&t.d, q, true, now, &mut out);
    t.d.free_query(q);
    let text = String::from_utf8_lossy(&out[..n]).into_owned();
    let answer: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    // Counted as the bot reads it: a 429 at the pool's pace, an error, or a result.
    let expected = if text.starts_with("HTTP/1.1 429") {
        Verdict::RefusedCap
    } else if answer.get("error").is_some() {
        Verdict::Unavailable
    } else {
        Verdict::Answered
    };
    assert_eq!(verdict, expected, "{text}");
    answer
}

fn statuses(t: &mut Sim, ids: &[&str], now: Instant) -> Vec<String> {
    let answer = inflight(t, ids, now);
    answer["result"]["value"]
        .as_array()
        .expect("value")
        .iter()
        .map(|v| v["status"].as_str().unwrap().to_string())
        .collect()
}

fn delivery(t: &mut Sim, id: &str, now: Instant) -> Value {
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":8,"method":"getBundleDelivery","params":["{id}"]}}"#);
    let (v, answer) = call(t, &body, now);
    assert_eq!(v, Verdict::Answered, "{answer}");
    answer["result"].clone()
}

#[test]
fn a_bundle_is_pending_while_it_waits_and_after_an_engine_took_it() {
    let (mut t, _, now) = one_region(1_000, 10_000);
    let id = send(&mut t, 1, now);
    assert_eq!(statuses(&mut t, &[&id], now), ["Pending"]);
    let answer = inflight(&mut t, &[&id], now);
    // Jito's shape, field for field.
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["result"]["context"]["slot"], 0);
    let v = &answer["result"]["value"][0];
    assert_eq!(v["bundle_id"], id.as_str());
    assert!(v["landed_slot"].is_null());
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    let later = Instant(now.0 + 3 * MS);
    t.answer(later);
    assert_eq!(t.totals().delivered, 1);
    // An engine took it: landing is the engine's to say, so an engine is asked, on a pair and
    // after the bundles. The only pair cools for a second, past the query's wait: the answer
    // is then the record's alone.
    asked_of_an_engine(&mut t, &id, later);
    t.d.dispatch(later);
    assert!(t.d.poll_answered().is_none(), "waiting for a pair");
    t.d.dispatch(Instant(later.0 + 251 * MS));
    let answer = deferred_answer(&mut t, Instant(later.0 + 251 * MS));
    assert_eq!(answer["id"], 9);
    assert_eq!(
        answer["result"]["value"][0]["status"], "Pending",
        "{answer}"
    );
    assert_eq!(answer["result"]["context"]["slot"], 0, "no engine's slot");
    let totals = t.totals();
    assert_eq!(
        (totals.status_queries, totals.status_queries_unanswered),
        (1, 1)
    );
    let d = delivery(&mut t, &id, later);
    assert_eq!(d["bundle_id"], id.as_str());
    assert_eq!(d["status"], "delivered");
    assert_eq!(d["tenant"], "default");
    assert_eq!(d["transactions"], 2);
    assert_eq!(d["ended_after_us"], 3_000);
    assert_eq!(d["submissions"], 1);
    let a = &d["attempts"][0];
    assert_eq!(a["region"], "ny");
    assert_eq!(a["egress"], "127.1.0.1");
    assert_eq!(a["sent_after_us"], 0);
    assert_eq!(a["answered_after_us"], 3_000);
    assert_eq!(a["verdict"], "accepted");
    assert_eq!(a["grpc_status"], 0);
    // The scripted engine's uuid.
    assert_eq!(d["engine"], "id");
    let unix_ms = d["admitted_unix_ms"].as_u64().unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(unix_ms.abs_diff(wall) < 60_000, "{unix_ms} vs {wall}");
}

#[test]
fn a_bundle_an_engine_rejected_or_that_expired_is_failed_not_invalid() {
    let (mut t, _, now) = one_region(1_000, 500);
    let rejected = send(&mut t, 1, now);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    // The one pair is busy until an interval after the answer: this one waits and expires.
    let expired = send(&mut t, 2, now);
    t.answer_error(3, "bundle contains an expired blockhash", now);
    let late = Instant(now.0 + 600 * MS);
    t.d.dispatch(late);
    let s = t.totals();
    assert_eq!((s.rejected, s.expired), (1, 1), "{s:?}");
    assert_eq!(
        statuses(&mut t, &[&rejected, &expired], late),
        ["Failed", "Failed"]
    );
    let d = delivery(&mut t, &rejected, late);
    assert_eq!(d["status"], "rejected");
    assert_eq!(d["attempts"][0]["verdict"], "rejected");
    assert_eq!(d["attempts"][0]["grpc_status"], 3);
    assert_eq!(d["engine"], "bundle contains an expired blockhash");
    let d = delivery(&mut t, &expired, late);
    assert_eq!(d["status"], "expired");
    assert_eq!(d["attempts_total"], 0);
    assert_eq!(d["attempts"].as_array().unwrap().len(), 0);
    assert!(d["engine"].is_null());
}

/// A small pool that bots send to faster than it delivers: bundles wait in the arena up to
/// their max age. The record keeps every bundle the relay still holds, however many came after
/// it; one overwritten would read `Invalid` (asked of an engine that never had it) while the
/// relay still holds it.
#[test]
fn a_bundle_still_waiting_is_pending_however_many_came_after_it() {
    use bundle_relay::journal::RECORDS_PER_THREAD_MIN;
    let (mut t, _, now) = one_region(1_000, 10_000);
    send(&mut t, 1, now);
    t.d.dispatch(now);
    assert!(
        t.flush(now) > 0,
        "the first goes; the pair is then paced for a second"
    );
    let waiting = send(&mut t, 2, now);
    for seed in 3..RECORDS_PER_THREAD_MIN as u64 + 10 {
        send(&mut t, seed, now);
    }
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"getInflightBundleStatuses","params":[["{waiting}"]]}}"#
    );
    assert_eq!(
        t.post(&body, now),
        Verdict::Answered,
        "the record answers, no engine is asked"
    );
    assert_eq!(statuses(&mut t, &[&waiting], now), ["Pending"]);
    assert_eq!(delivery(&mut t, &waiting, now)["status"], "in_flight");
}

/// A bot sends a bundle an engine then takes, and sends it again (searchers resend): the
/// second copy waits and expires. The engine still holds the first, so the bundle is
/// `Pending` and the engine is asked, not `Failed` from the latest copy alone.
#[test]
fn a_bundle_sent_again_after_an_engine_took_it_is_not_failed_by_the_later_copy() {
    let (mut t, _, now) = one_region(1_000, 500);
    let id = send(&mut t, 1, now);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "sent");
    // Again while the first copy's call is out: it waits for the one pair, paced past its max
    // age once the engine takes the first.
    assert_eq!(send(&mut t, 1, at(now, 1)), id, "the same bundle again");
    t.answer(at(now, 1));
    let late = at(now, 600);
    t.d.dispatch(late);
    let s = t.totals();
    assert_eq!((s.delivered, s.expired), (1, 1), "{s:?}");
    asked_of_an_engine(&mut t, &id, late);
    // The only pair is paced past the query's wait: the record answers alone.
    t.d.dispatch(at(late, 251));
    let answer = deferred_answer(&mut t, at(late, 251));
    assert_eq!(
        answer["result"]["value"][0]["status"], "Pending",
        "{answer}"
    );
}

/// A deferred answer that does not fit the room its connection's output has left (a bot
/// that pipelines and has not read earlier answers) says so, not that the engine's answer
/// outgrew the relay's buffer, which it did not.
#[test]
fn a_deferred_answer_with_no_room_beside_unread_answers_says_so() {
    let (mut t, _, now) = one_region(1, 10_000);
    let ids: Vec<String> = (1..=5)
        .map(|seed| format!("\"{}\"", taken(&mut t, seed, at(now, seed * 2))))
        .collect();
    let asked = at(now, 20);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"getInflightBundleStatuses","params":[[{}]]}}"#,
        ids.join(",")
    );
    assert_eq!(t.post(&body, asked), Verdict::Deferred, "{}", t.response());
    t.d.dispatch(asked);
    assert!(t.flush(asked) > 0, "the query goes to the engine");
    let entries: Vec<String> = ids
        .iter()
        .map(|id| format!(r#"{{"bundle_id":{id},"status":"Pending","landed_slot":null}}"#))
        .collect();
    let engine = format!(
        r#"{{"jsonrpc":"2.0","result":{{"context":{{"slot":9}},"value":[{}]}},"id":1}}"#,
        entries.join(",")
    );
    let (pair, stream) = (t.pair, t.stream);
    t.d.received(pair, &json_reply(stream, &engine), at(asked, 1));
    let (_, q) = t.d.poll_answered().expect("answered");
    // Room for an error, not for the five entries.
    let mut out = vec![0u8; 500];
    let (n, verdict) = intake::write_answer(&t.d, q, true, at(asked, 1), &mut out);
    t.d.free_query(q);
    let text = String::from_utf8_lossy(&out[..n]).into_owned();
    assert_eq!(verdict, Verdict::Unavailable, "{text}");
    assert!(
        text.contains(
            "the answer does not fit beside the answers this connection has not read yet: \
             read them before asking more"
        ),
        "{text}"
    );
}

/// The engine's JSON-RPC answer on `stream` with `body`, as its HTTP/2 endpoint sends it.
fn json_reply(stream: u32, body: &str) -> Vec<u8> {
    h2_support::data_reply(stream, b"application/json", body.as_bytes(), false)
}

/// A send the engine failed after reading it whole (INTERNAL: "it may have been processed")
/// ends the bundle failed, but it may have landed: the engine is asked, and what it says of
/// landing is the bot's answer. Without an engine that took or may have taken it, the record's
/// `Failed` would stand even for a bundle that landed.
#[test]
fn a_bundle_lost_after_it_was_sent_whole_is_asked_of_its_engine_and_shows_landed() {
    let (mut t, _, now) = one_region(10, 10_000);
    let id = send(&mut t, 1, now);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    t.answer_error(13, "internal error", now);
    assert_eq!(t.totals().failed, 1);
    let later = at(now, 11);
    asked_of_an_engine(&mut t, &id, later);
    t.d.dispatch(later);
    assert!(t.flush(later) > 0, "the query goes to the engine");
    let engine = format!(
        r#"{{"jsonrpc":"2.0","result":{{"context":{{"slot":4242}},"value":[{{"bundle_id":"{id}","status":"Landed","landed_slot":4240}}]}},"id":1}}"#
    );
    let (pair, stream) = (t.pair, t.stream);
    t.d.received(pair, &json_reply(stream, &engine), at(later, 1));
    let answer = deferred_answer(&mut t, at(later, 1));
    let v = &answer["result"]["value"][0];
    assert_eq!(
        (&v["status"], &v["landed_slot"]),
        (&Value::from("Landed"), &Value::from(4240)),
        "{answer}"
    );
    let d = delivery(&mut t, &id, later);
    assert_eq!(d["attempts"][0]["verdict"], "lost");
}

/// Jito answers `getInflightBundleStatuses` for the last five minutes only: past that a
/// bundle is `Invalid` ("not in our system", on which bots stop polling). A bundle an engine
/// took more than five minutes ago is asked of the engine, and its `Invalid` reaches the bot,
/// not the record's `Pending`, which would keep the bot polling; the relay's own
/// `getBundleDelivery` still has it.
#[test]
fn a_delivered_bundle_past_jitos_five_minute_look_back_is_invalid_as_the_engine_says() {
    let (mut t, _, now) = one_region(10, 10_000);
    let id = taken(&mut t, 1, now);
    // The engine asked at `now + ms` answers `Invalid` `took` ms later: what the bot reads.
    let engine_says_invalid = |t: &mut Sim, ms: u64, took: u64| {
        let when = at(now, ms);
        asked_of_an_engine(t, &id, when);
        t.d.dispatch(when);
        assert!(t.flush(when) > 0, "the query goes to the engine");
        let engine = format!(
            r#"{{"jsonrpc":"2.0","result":{{"context":{{"slot":9}},"value":[{{"bundle_id":"{id}","status":"Invalid","landed_slot":null}}]}},"id":1}}"#
        );
        let (pair, stream) = (t.pair, t.stream);
        t.stream += 2;
        t.d.received(pair, &json_reply(stream, &engine), at(when, took));
        let answer = deferred_answer(t, at(when, took));
        answer["result"]["value"][0]["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Within the five minutes an engine that does not know it is not the one that took it.
    assert_eq!(
        engine_says_invalid(&mut t, 299_000, 1),
        "Pending",
        "at 299 s"
    );
    // Asked within them, answered past them: the answer's moment counts.
    assert_eq!(
        engine_says_invalid(&mut t, 299_700, 2_000),
        "Invalid",
        "answered at 301.7 s"
    );
    assert_eq!(engine_says_invalid(&mut t, 302_000, 1), "Invalid");
    assert_eq!(
        delivery(&mut t, &id, at(now, 302_001))["status"],
        "delivered"
    );
}

/// An engine's getBundleStatuses answer that leaves out a bundle it does not know (or lists
/// them in another order): each entry reaches the bot at the place of the id it names, and the
/// id the engine left out is `null`, not given another bundle's entry.
#[test]
fn getbundlestatuses_places_each_engine_entry_at_the_id_it_names() {
    let (mut t, _, now) = one_region(10, 10_000);
    let (a, b) = ("aa".repeat(32), "bb".repeat(32));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"getBundleStatuses","params":[["{a}","{b}"]]}}"#
    );
    assert_eq!(t.post(&body, now), Verdict::Deferred);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "the query goes to the engine");
    let engine = format!(
        r#"{{"jsonrpc":"2.0","result":{{"context":{{"slot":77}},"value":[{{"bundle_id":"{b}","slot":70,"transactions":["x"],"confirmation_status":"confirmed","err":{{"Ok":null}}}}]}},"id":1}}"#
    );
    let (pair, stream) = (t.pair, t.stream);
    t.d.received(pair, &json_reply(stream, &engine), at(now, 1));
    let answer = deferred_answer(&mut t, at(now, 1));
    let v = &answer["result"]["value"];
    assert!(v[0].is_null(), "{answer}");
    assert_eq!(v[1]["bundle_id"], b.as_str(), "{answer}");
    assert_eq!(v[1]["slot"], 70);
    assert_eq!(answer["result"]["context"]["slot"], 77);
}

/// A thread whose one pair carries a bot's getBundleStatuses (id 5, one bundle id) to the
/// engine, on stream `t.stream`.
fn a_status_query_at_the_engine() -> (Sim, Instant) {
    let (mut t, _, now) = one_region(10, 10_000);
    let a = "aa".repeat(32);
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"getBundleStatuses","params":[["{a}"]]}}"#);
    assert_eq!(t.post(&body, now), Verdict::Deferred);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "the query goes to the engine");
    (t, now)
}

/// An engine that answers getBundleStatuses with an error of its own (-32603 "internal
/// error", or a code Jito never listed) is the engine's answer: the bot gets its code and its
/// words, as a bot asking Jito directly would, not the relay's "no engine answered".
#[test]
fn getbundlestatuses_an_engine_fails_reaches_the_bot_with_the_engines_code_and_words() {
    for (code, words) in [
        (-32603, "bank forks lock poisoned"),
        (-32010, "slot skipped, try later"),
    ] {
        let (mut t, now) = a_status_query_at_the_engine();
        let engine =
            format!(r#"{{"jsonrpc":"2.0","error":{{"code":{code},"message":"{words}"}},"id":1}}"#);
        let (pair, stream) = (t.pair, t.stream);
        t.d.received(pair, &json_reply(stream, &engine), at(now, 1));
        let answer = deferred_answer(&mut t, at(now, 1));
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert_eq!(answer["error"]["message"], words, "{answer}");
        assert_eq!(answer["id"], 5, "{answer}");
        let s = t.d.stats();
        assert_eq!(
            (
                s.status_queries_answered.get(),
                s.status_queries_unanswered.get()
            ),
            (1, 0),
            "the engine answered"
        );
    }
}

/// The message the bot is given when the engine answers its status query with -32603 and
/// `words` (as the engine wrote them in its JSON).
fn engine_words_as_told(words: &str) -> String {
    let (mut t, now) = a_status_query_at_the_engine();
    let engine =
        format!(r#"{{"jsonrpc":"2.0","error":{{"code":-32603,"message":"{words}"}},"id":1}}"#);
    let (pair, stream) = (t.pair, t.stream);
    t.d.received(pair, &json_reply(stream, &engine), at(now, 1));
    let answer = deferred_answer(&mut t, at(now, 1));
    answer["error"]["message"].as_str().unwrap().to_string()
}

/// An engine error whose words are longer than the relay keeps reaches the bot cut at a
/// character boundary and marked `…`, not as an empty message.
#[test]
fn getbundlestatuses_an_engine_fails_with_long_words_reaches_the_bot_cut_not_empty() {
    let words = format!("bank forks lock poisoned: {}", "é".repeat(300));
    let said = engine_words_as_told(&words);
    assert!(said.starts_with("bank forks lock poisoned: éé"), "{said}");
    assert!(said.ends_with("é…"), "{said}");
    assert!(words.starts_with(said.trim_end_matches('…')), "{said}");
    // The same cut when the words arrive escaped.
    let said = engine_words_as_told(&format!("a\\u00e9 {}", "x".repeat(300)));
    assert!(said.starts_with("aé xxx") && said.ends_with("x…"), "{said}");
}

/// A JSON-RPC error the engine sends with HTTP 401 or 403 refuses the relay's address, not the
/// bot's question: the bot is told no engine answered, not given the engine's words about the
/// relay's credentials.
#[test]
fn getbundlestatuses_an_engine_refuses_with_401_or_403_is_not_passed_on_as_its_answer() {
    use h2_support::{block, push_frame};
    for status in [&b"401"[..], b"403"] {
        let (mut t, now) = a_status_query_at_the_engine();
        let engine =
            r#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"invalid auth token"},"id":1}"#;
        let mut reply = Vec::new();
        let fields = block(&[(b":status", status), (b"content-type", b"application/json")]);
        // HEADERS (END_HEADERS), then DATA (END_STREAM).
        let h = push_frame(&mut reply, 0x1, 0x4, &fields);
        let d = push_frame(&mut reply, 0x0, 0x1, engine.as_bytes());
        for at in [h, d] {
            reply[at..at + 4].copy_from_slice(&t.stream.to_be_bytes());
        }
        let pair = t.pair;
        t.d.received(pair, &reply, at(now, 1));
        let answer = deferred_answer(&mut t, at(now, 1));
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(
            !message.contains("invalid auth token") && message.contains("refused the relay"),
            "{answer}"
        );
    }
}

#[test]
fn a_rate_limited_send_shows_before_the_send_that_took_the_bundle() {
    let (mut t, _, now) = one_region(100, 10_000);
    let id = send(&mut t, 1, now);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    let text = "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: \
                Retry after 300ms";
    t.answer_error(8, text, now);
    let d = delivery(&mut t, &id, now);
    assert_eq!(d["status"], "in_flight");
    assert!(d["ended_after_us"].is_null());
    assert_eq!(d["attempts"][0]["verdict"], "rate_limited");
    assert_eq!(d["attempts"][0]["retry_after_ms"], 300);
    assert!(
        d["engine"]
            .as_str()
            .unwrap()
            .starts_with("Rate limit exceeded"),
        "{d}"
    );
    // The cooldown over, the same pair sends it again and the engine takes it.
    let later = Instant(now.0 + 301 * MS);
    t.d.dispatch(later);
    assert!(t.flush(later) > 0);
    t.answer(later);
    let d = delivery(&mut t, &id, later);
    assert_eq!(d["status"], "delivered");
    assert_eq!(d["attempts_total"], 2);
    let verdicts: Vec<&str> = d["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["rate_limited", "accepted"]);
    assert_eq!(d["attempts"][1]["sent_after_us"], 301_000);
}

/// An id the record has not is asked of an engine (it may have gone through another relay).
/// With no engine answer in time the relay does not know it: the call is refused as Jito
/// refuses a caller over its rate, for the bot to ask again, not answered `Invalid`, Jito's
/// word for "not in our system", on which bots stop polling a bundle that may have landed.
/// Its delivery record is `null`: that is this relay's alone.
#[test]
fn an_unknown_bundle_no_engine_answers_for_in_time_is_refused_to_ask_again_not_invalid() {
    let (mut t, _, now) = one_region(1_000, 10_000);
    let unknown = "ab".repeat(32);
    let known = send(&mut t, 1, now);
    // Either case names the same bundle; one the record has and no engine took yet it answers.
    assert_eq!(statuses(&mut t, &[&known.to_uppercase()], now), ["Pending"]);
    let list = [&unknown, &known, &unknown.to_uppercase()].map(|i| format!("\"{i}\""));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"getInflightBundleStatuses","params":[[{}]]}}"#,
        list.join(",")
    );
    assert_eq!(t.post(&body, now), Verdict::Deferred);
    // The only pair carries the bundle first, then is paced past the query's wait.
    t.d.dispatch(now);
    t.flush(now);
    t.d.dispatch(Instant(now.0 + 251 * MS));
    let answer = deferred_answer(&mut t, Instant(now.0 + 251 * MS));
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32097, "{answer}");
    let m = answer["error"]["message"].as_str().unwrap();
    assert!(m.contains("Retry after"), "{m}");
    assert!(delivery(&mut t, &unknown, now).is_null());
}

/// The same when the thread's table of queries waiting on engines is full: an id the record
/// has not is refused for the bot to ask again, never answered `Invalid`; ids all on record
/// are still answered from it.
#[test]
fn an_unknown_bundle_asked_while_the_query_table_is_full_is_refused_not_invalid() {
    let (mut t, _, now) = one_region(1_000, 10_000);
    let known = send(&mut t, 1, now);
    let ask = |seed: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{seed},"method":"getInflightBundleStatuses","params":[["{:064x}"]]}}"#,
            seed + 1
        )
    };
    for q in 0..bundle_relay::relay::queries::QUERIES_MAX {
        assert_eq!(t.post(&ask(q), now), Verdict::Deferred, "query {q}");
    }
    let (v, answer) = call(&mut t, &ask(999), now);
    assert_eq!(v, Verdict::RefusedCap, "{answer}");
    assert_eq!(answer["error"]["code"], -32097, "{answer}");
    assert_eq!(statuses(&mut t, &[&known], now), ["Pending"]);
}

#[test]
fn a_malformed_bundle_id_is_refused_naming_it() {
    let (mut t, _, now) = one_region(1_000, 10_000);
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[["ab","xyz"]]}"#;
    let (v, answer) = call(&mut t, body, now);
    assert_eq!(v, Verdict::Invalid);
    assert_eq!(answer["error"]["code"], -32602);
    let m = answer["error"]["message"].as_str().unwrap();
    assert!(m.contains("bundle id 0 is \"ab\""), "{m}");
    assert!(m.contains("64 hex characters"), "{m}");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"getBundleDelivery","params":[5]}"#;
    let (_, answer) = call(&mut t, body, now);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[[]]}"#;
    let (_, answer) = call(&mut t, body, now);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

// ---- a region whose engine throttles everyone ----

/// The bundle posted, sent, and answered "globally rate limited" at `now`.
fn throttled(t: &mut Sim, seed: u64, now: Instant) {
    assert_eq!(t.post_bundle(seed, now), Verdict::Admitted);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "sent");
    t.answer_error(8, GLOBAL_THROTTLE_MESSAGE, now);
}

/// Whether a call goes out at `now`.
fn sends(t: &mut Sim, now: Instant) -> bool {
    t.d.dispatch(now);
    t.flush(now) > 0
}

fn at(now: Instant, ms: u64) -> Instant {
    Instant(now.0 + ms * MS)
}

#[test]
fn a_global_throttle_backs_the_whole_region_off_and_costs_the_address_no_cooldown() {
    // A 10 ms interval: the pair alone would be ready again long before the back-off ends.
    let (mut t, _, now) = one_region(10, 10_000);
    throttled(&mut t, 1, now);
    assert!(!sends(&mut t, at(now, 50)), "the region backs off");
    assert!(
        t.d.next_deadline().is_some_and(|d| d.0 <= at(now, 100).0),
        "the dispatcher wakes when the back-off ends"
    );
    assert!(
        sends(&mut t, at(now, 101)),
        "the same pair sends once it ends"
    );
    t.answer(at(now, 102));
    let s = t.totals();
    assert_eq!((s.delivered, s.cooldowns, s.retries), (1, 0, 1), "{s:?}");
    assert_eq!(t.stats.region(0).throttles.get(), 1);
    assert!(t.d.check_accounting());
}

#[test]
fn back_offs_double_while_the_engine_keeps_throttling_and_start_over_after_an_accept() {
    let (mut t, _, now) = one_region(10, 10_000);
    throttled(&mut t, 1, now);
    let second = at(now, 101);
    assert!(sends(&mut t, second));
    t.answer_error(8, GLOBAL_THROTTLE_MESSAGE, second);
    assert!(!sends(&mut t, at(second, 150)), "twice as long: 200 ms");
    assert!(sends(&mut t, at(second, 201)));
    let ok = at(second, 202);
    t.answer(ok);
    assert_eq!(t.totals().delivered, 1);
    // Accepted: the next throttle waits 100 ms again.
    let next = at(ok, 20);
    throttled(&mut t, 2, next);
    assert!(!sends(&mut t, at(next, 90)));
    assert!(sends(&mut t, at(next, 101)));
}

#[test]
fn a_global_throttle_that_names_its_wait_backs_the_region_off_exactly_that_long() {
    let (mut t, _, now) = one_region(10, 10_000);
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    assert!(sends(&mut t, now));
    let said = format!("{GLOBAL_THROTTLE_MESSAGE} Retry after 2000ms");
    t.answer_error(8, &said, now);
    assert_eq!(
        t.stats.region(0).throttles.get(),
        1,
        "a throttle, not a cooldown"
    );
    assert!(
        !sends(&mut t, at(now, 1_500)),
        "the engine asked for 2000 ms"
    );
    assert!(!sends(&mut t, at(now, 1_999)));
    assert!(
        t.d.next_deadline().is_some_and(|d| d.0 <= at(now, 2_000).0),
        "the dispatcher wakes when the wait ends"
    );
    assert!(sends(&mut t, at(now, 2_001)), "and sends once it ends");
    // A shorter wait is honoured as exactly: no back-off of the relay's own stretches it.
    let second = at(now, 2_001);
    t.answer_error(
        8,
        &format!("{GLOBAL_THROTTLE_MESSAGE} Retry after 30ms"),
        second,
    );
    assert!(!sends(&mut t, at(second, 29)));
    assert!(sends(&mut t, at(second, 31)));
    t.answer(at(second, 32));
    assert_eq!(t.totals().delivered, 1);
    assert!(t.d.check_accounting());
}

/// The relay's own calls (tip accounts, leader polls, a silent region's probe) keep a
/// throttled region's back-off too: the engine throttles everyone, and one more call only
/// prolongs it.
#[test]
fn a_throttled_region_gets_no_tip_refresh_until_its_back_off_ends() {
    use bundle_relay::relay::tips::TIP_REFRESH_MS;
    // Bundles live 40 ms: the throttled one has expired when the refresh comes due, so the
    // region has nothing of a bot's waiting.
    let (mut t, _, start) = one_region(10, 40);
    // The tip accounts were asked for when the pair came up: the refresh is due 300 s on.
    let before = at(start, TIP_REFRESH_MS - 50);
    throttled(&mut t, 1, before);
    assert!(
        !sends(&mut t, at(before, 70)),
        "the refresh came due, but the region backs off"
    );
    assert_eq!(t.totals().expired, 1);
    assert!(
        sends(&mut t, at(before, 101)),
        "once it ends, the refresh goes"
    );
}

#[test]
fn a_sources_own_rate_limit_still_cools_only_that_pair() {
    let (mut t, _, now) = one_region(10, 10_000);
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    t.answer_error(
        8,
        "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: Retry after 300ms",
        now,
    );
    assert!(!sends(&mut t, at(now, 290)));
    assert!(sends(&mut t, at(now, 301)));
    let s = t.totals();
    assert_eq!(s.cooldowns, 1, "{s:?}");
    assert_eq!(t.stats.region(0).throttles.get(), 0);
}

// ---- the tip accounts a bot is answered ----

/// The engine's answer on `stream` to GetTipAccounts: `accounts`.
fn tips_reply(stream: u32, accounts: &[String]) -> Vec<u8> {
    use prost::Message as _;
    let msg = bundle_relay::proto::searcher::GetTipAccountsResponse {
        accounts: accounts.to_vec(),
    }
    .encode_to_vec();
    let mut data = vec![0u8];
    data.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    data.extend_from_slice(&msg);
    h2_support::data_reply(stream, b"application/grpc", &data, true)
}

/// Eight distinct public keys, as an engine would list its tip accounts.
fn engine_accounts(n: u8) -> Vec<String> {
    (1..=n)
        .map(|i| solana_address::Address::new_from_array([i; 32]).to_string())
        .collect()
}

/// A thread of one region and one source, started with nothing connected, whose pair comes up
/// 30 ms later; the next iteration sends GetTipAccounts on stream 1. Returns the dispatcher,
/// its pair, its stats and when the call went.
fn first_tip_call() -> (
    bundle_relay::relay::dispatch::Dispatcher,
    bundle_relay::limiter::PairId,
    std::sync::Arc<bundle_relay::metrics::accounting::Stats>,
    Instant,
) {
    let region = bundle_relay::relay::RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap());
    let spec = bundle_relay::relay::Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    let start = Instant(MS);
    let (mut d, stats) = dispatcher_support::unconnected(&spec, 0, start);
    d.dispatch(start);
    let order = d.poll_connect(start).expect("the pair connects at start");
    assert!(
        d.poll_dirty().is_none(),
        "nothing to send before the connect"
    );
    // Connected and greeted 30 ms later: the pair joins rotation.
    let up = at(start, 30);
    d.connected(order.pair, up);
    let flush = dispatcher_support::flush;
    flush(&mut d, up);
    d.received(order.pair, &h2_support::engine_hello(), up);
    flush(&mut d, up);
    // The next iteration asks, on the first call of the connection (stream 1).
    let next = at(up, 1);
    d.dispatch(next);
    assert!(flush(&mut d, next) > 0, "GetTipAccounts goes out at once");
    (d, order.pair, stats, next)
}

/// Whether a call goes out from `d` at `now`.
fn calls(d: &mut bundle_relay::relay::dispatch::Dispatcher, now: Instant) -> bool {
    d.dispatch(now);
    dispatcher_support::flush(d, now) > 0
}

#[test]
fn the_engines_tip_accounts_are_asked_for_as_soon_as_the_first_pair_is_up() {
    let (mut d, pair, stats, next) = first_tip_call();
    let accounts = engine_accounts(8);
    d.received(pair, &tips_reply(1, &accounts), at(next, 1));
    let expected = serde_json::to_string(&accounts).unwrap();
    assert_eq!(
        std::str::from_utf8(d.tip_accounts_json()).unwrap(),
        expected,
        "bots are answered the engine's list"
    );
    assert_eq!(
        (stats.tip_calls.get(), stats.tip_answers.get()),
        (1, 1),
        "one call, its answer kept"
    );
}

/// A first GetTipAccounts the engine refuses (the address was used a moment ago by the
/// process before this one, or the engine is briefly unavailable) is asked again a few
/// seconds on, not a whole refresh period later: bots get the engine's list within seconds.
#[test]
fn a_tip_refresh_the_engine_did_not_answer_is_asked_again_within_seconds() {
    use bundle_relay::relay::tips::{TIP_REFRESH_MS, TIP_RETRY_MS};
    let (mut d, pair, stats, next) = first_tip_call();
    d.received(
        pair,
        &h2_support::error_reply(1, 14, "temporarily unavailable"),
        at(next, 1),
    );
    assert!(
        !calls(&mut d, at(next, TIP_RETRY_MS - 10)),
        "not before the retry"
    );
    let again = at(next, TIP_RETRY_MS + 2);
    assert!(
        calls(&mut d, again),
        "asked again {TIP_RETRY_MS} ms on, not {TIP_REFRESH_MS} ms"
    );
    let accounts = engine_accounts(8);
    d.received(pair, &tips_reply(3, &accounts), at(again, 1));
    assert_eq!(
        std::str::from_utf8(d.tip_accounts_json()).unwrap(),
        serde_json::to_string(&accounts).unwrap()
    );
    assert_eq!((stats.tip_calls.get(), stats.tip_answers.get()), (2, 1));
}

/// An answer the relay will not serve (more accounts than it keeps) leaves bots the list they
/// had, is counted so an operator sees it, and is not asked for again until the refresh
/// period ends: the engine would only say the same.
#[test]
fn a_tip_answer_the_relay_refuses_keeps_the_list_is_counted_and_waits_a_refresh_period() {
    use bundle_relay::relay::tips::{TIP_ACCOUNTS_MAX, TIP_REFRESH_MS, TIP_RETRY_MS};
    let (mut d, pair, stats, next) = first_tip_call();
    let before = d.tip_accounts_json().to_vec();
    let too_many = engine_accounts(TIP_ACCOUNTS_MAX as u8 + 1);
    d.received(pair, &tips_reply(1, &too_many), at(next, 1));
    assert_eq!(d.tip_accounts_json(), before, "the list stays");
    assert_eq!(
        (stats.tip_answers.get(), stats.tip_answers_refused.get()),
        (0, 1)
    );
    assert!(!calls(&mut d, at(next, TIP_RETRY_MS + 2)));
    assert!(calls(&mut d, at(next, TIP_REFRESH_MS + 2)));
}

/// A region whose every pair is taken by bundles the moment it is ready (bots always have
/// more waiting than the pool sends) still gets its tip accounts refreshed: bundles come first
/// for one refresh period past the due time, then one call takes a pair's turn. Otherwise bots
/// would be answered a list older than any refresh period for as long as the load lasts.
#[test]
fn a_region_always_busy_with_bundles_still_refreshes_its_tip_accounts_one_period_late_at_most() {
    use bundle_relay::relay::tips::TIP_REFRESH_MS;
    let (mut t, _, start) = one_region(1_000, 10_000);
    // The tip accounts were asked for when the pair came up: the next refresh is due
    // TIP_REFRESH_MS on.
    let asked = t.stats.tip_calls.get();
    let mut now = start;
    let mut seed = 0;
    let mut refreshed_at = None;
    while now.0 < start.0 + (2 * TIP_REFRESH_MS + 10_000) * MS {
        // Two bundles a second for a pair that sends one: some always wait.
        for _ in 0..2 {
            seed += 1;
            // What the pair cannot send within the max age is refused: the rest wait.
            let v = t.post_bundle(seed, now);
            assert!(
                matches!(v, Verdict::Admitted | Verdict::RefusedBacklog),
                "{v:?}"
            );
        }
        if t.send(now) {
            t.answer(now);
        }
        if t.stats.tip_calls.get() > asked {
            refreshed_at = Some(now);
            break;
        }
        now = at(now, 1_000);
    }
    let refreshed_at = refreshed_at.expect("the tip accounts were refreshed under the load");
    let after_s = (refreshed_at.0 - start.0) / MS / 1_000;
    assert!(
        (TIP_REFRESH_MS / 1_000..=2 * TIP_REFRESH_MS / 1_000 + 2).contains(&after_s),
        "refreshed {after_s} s after the last, bundles first for a period past the due time"
    );
}

/// A tip refresh the engine keeps failing, in a region bots keep busy, jumps ahead of the
/// bundles once a refresh period, not at every retry: the engine's failure must not hand the
/// bots' pairs to tip calls every few seconds.
#[test]
fn a_failing_tip_refresh_in_a_busy_region_jumps_ahead_of_bundles_once_a_period_at_most() {
    use bundle_relay::relay::tips::TIP_REFRESH_MS;
    let (mut t, _, start) = one_region(1_000, 10_000);
    let mut calls = t.stats.tip_calls.get();
    let mut now = start;
    let mut seed = 0;
    while now.0 < start.0 + 3 * TIP_REFRESH_MS * MS {
        for _ in 0..2 {
            seed += 1;
            // What the pair cannot send within the max age is refused: the rest wait.
            let v = t.post_bundle(seed, now);
            assert!(
                matches!(v, Verdict::Admitted | Verdict::RefusedBacklog),
                "{v:?}"
            );
        }
        if t.send(now) {
            if t.stats.tip_calls.get() > calls {
                calls = t.stats.tip_calls.get();
                t.answer_error(14, "temporarily unavailable", now);
            } else {
                t.answer(now);
            }
        }
        now = at(now, 1_000);
    }
    let asked = t.stats.tip_calls.get() - 1;
    assert!(
        (1..=2).contains(&asked),
        "{asked} tip calls in {} s of a busy region, each failed",
        3 * TIP_REFRESH_MS / 1_000
    );
}

/// `bundle_relay_upstream_calls_total` counts each call under the gRPC status the engine
/// answered, the ones that send the bundle again (UNAVAILABLE) or leave its fate unknown
/// (INTERNAL) included; only a call that ended without any status is a transport error.
#[test]
fn upstream_calls_are_counted_under_the_status_the_engine_answered_even_when_it_is_retried() {
    use bundle_relay::grpc::Code;
    use bundle_relay::metrics::{STATUS_SLOT_TRANSPORT, status_label};
    let (mut t, _, mut now) = one_region(1_000, 60_000);
    let status = |t: &Sim, code: Code| t.metrics.snapshot().regions[0].upstream[code.0 as usize];
    send(&mut t, 1, now);
    assert!(sends(&mut t, now));
    t.answer_error(Code::UNAVAILABLE.0, "overloaded", now);
    // Sent again on the same pair once its interval passed; the engine fails the call.
    now = at(now, 1_001);
    assert!(sends(&mut t, now));
    t.answer_error(Code::INTERNAL.0, "boom", now);
    let s = t.metrics.snapshot();
    let up = &s.regions[0].upstream;
    assert_eq!(
        (status(&t, Code::UNAVAILABLE), status(&t, Code::INTERNAL)),
        (1, 1),
        "{}: {up:?}",
        status_label(STATUS_SLOT_TRANSPORT)
    );
    assert_eq!(up[STATUS_SLOT_TRANSPORT], 0);
    let tot = t.totals();
    assert_eq!((tot.admitted, tot.failed), (1, 1), "{tot:?}");
}

/// A stop gives up the status queries still waiting for a pair or for their engine's answer:
/// each is answered without the engine and counted unanswered, so every forwarded query is
/// answered or unanswered in `/metrics`.
#[test]
fn status_queries_a_stop_gives_up_are_counted_unanswered() {
    let (mut t, _, now) = one_region(1_000, 10_000);
    let id = taken(&mut t, 1, now);
    // The only pair is paced for a second: both queries wait for it.
    asked_of_an_engine(&mut t, &id, now);
    asked_of_an_engine(&mut t, &id, now);
    t.d.dispatch(now);
    t.d.abandon_all(now);
    let mut given_up = 0;
    while let Some((_, q)) = t.d.poll_answered() {
        t.d.free_query(q);
        given_up += 1;
    }
    assert_eq!(given_up, 2);
    let totals = t.totals();
    assert_eq!(
        (totals.status_queries, totals.status_queries_unanswered),
        (2, 2),
        "{totals:?}"
    );
}

/// An engine whose front end keeps the connection alive (its own SETTINGS and PINGs) while
/// the calls sent into it go unanswered is silent all the same: past a quarter of the call
/// deadline the region is paused, its bundles go to other regions, and a probe asks whether
/// it answers again. Frames that answer no call are no sign that the engine behind works.
#[test]
fn an_engine_that_keeps_its_connection_alive_but_answers_no_call_is_silent() {
    let (mut t, _, now) = dispatcher_support::one_region_with(1_000, 60_000, |s| {
        s.upstream_timeout_ms = 4_000;
    });
    send(&mut t, 1, now);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "the call is written");
    // Its front end says SETTINGS and PINGs, at 500 ms and 900 ms.
    let mut alive = vec![0u8; 9 + 9 + 8];
    bundle_relay::h2::frame::write(&mut alive, 4, 0, 0, &[]).unwrap();
    bundle_relay::h2::frame::write(&mut alive[9..], 6, 0, 0, &[7; 8]).unwrap();
    for ms in [500, 900] {
        t.d.received(t.pair, &alive, at(now, ms));
        t.flush(at(now, ms));
    }
    let later = at(now, 1_001);
    t.d.run_timers(later);
    t.d.dispatch(later);
    assert_eq!(t.totals().silences, 1, "{:?}", t.totals());
}

/// A silent region whose engine answers the probe (GetTipAccounts) may still hang in the
/// bundle path alone: bundles go again one at a time, not all at once, until one is
/// answered. One that goes unanswered sends the region back to probing; one answered ends
/// the silence and the rest go.
#[test]
fn after_a_silence_bundles_go_one_at_a_time_until_one_is_answered() {
    use dispatcher_support::{answer_calls, flush_calls};
    let (mut t, now) = dispatcher_support::pool(4, |s| {
        s.regions[0].interval_ms = 10;
        s.upstream_timeout_ms = 4_000;
        s.bundle_max_age_ms = 60_000;
        // The silence PINGs every connection; this engine's front end would answer them.
        s.ping_timeout_ms = 600_000;
    });
    let mut calls = Vec::new();
    let step = |t: &mut Sim, now: Instant, calls: &mut Vec<_>| {
        t.d.run_timers(now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, calls);
    };
    send(&mut t, 1, now);
    step(&mut t, now, &mut calls);
    assert_eq!(calls.len(), 1, "bundle 1 is sent and hangs");
    calls.clear();
    let now = at(now, 1_001);
    for seed in 2..=4 {
        send(&mut t, seed, now);
    }
    step(&mut t, now, &mut calls);
    assert_eq!(t.totals().silences, 1);
    assert_eq!(calls.len(), 1, "the probe alone");
    answer_calls(&mut t.d, now, &mut calls);
    step(&mut t, now, &mut calls);
    assert_eq!(calls.len(), 1, "one bundle, not three");
    // It hangs too: past its deadline the region probes again, and no bundle goes meanwhile.
    let trial = calls.pop().unwrap();
    let now = at(now, 4_001);
    step(&mut t, now, &mut calls);
    let now = at(now, 200);
    step(&mut t, now, &mut calls);
    assert_eq!(
        calls.len(),
        1,
        "a probe, after its back-off: {calls:?} (trial {trial:?})"
    );
    assert_ne!(calls[0], trial);
    answer_calls(&mut t.d, now, &mut calls);
    step(&mut t, now, &mut calls);
    assert_eq!(calls.len(), 1, "one bundle again");
    // This one is answered: the silence ends and the rest go.
    answer_calls(&mut t.d, now, &mut calls);
    let now = at(now, 11);
    step(&mut t, now, &mut calls);
    assert_eq!(calls.len(), 1, "the last waiting bundle");
    answer_calls(&mut t.d, now, &mut calls);
    let totals = t.totals();
    assert_eq!(
        (totals.admitted, totals.delivered, totals.in_flight),
        (4, 2, 0),
        "{totals:?}"
    );
    assert!(t.d.check_accounting());
}

/// The engine refuses the one pair's call with PERMISSION_DENIED; its socket is released.
fn denied(t: &mut Sim, now: Instant) {
    assert!(sends(t, now), "the bundle went");
    t.answer_error(7, "source not allowed", now);
    while let Some(p) = t.d.poll_close() {
        t.d.socket_released(p, now, 0);
    }
}

/// Reconnects the one pair at `now`, greeted by the engine; its calls start at stream 1.
fn reconnected(t: &mut Sim, now: Instant) {
    let order = t.d.poll_connect(now).expect("a connect is due");
    t.d.connected(order.pair, now);
    t.flush(now);
    t.d.received(order.pair, &h2_support::engine_hello(), now);
    t.flush(now);
    t.stream = 1;
}

/// A source the engine refuses (PERMISSION_DENIED) is out of rotation, and tried again within
/// ten seconds (jittered over the upper half): a refusal that was a blip costs seconds, not
/// five minutes. Refused again, it waits twice as long, and so on up to five minutes; a call
/// answered on it starts over at ten seconds.
#[test]
fn a_refused_source_is_tried_again_within_ten_seconds_then_twice_as_long_until_a_call_is_answered()
{
    let (mut t, _, now) = one_region(10, 600_000);
    send(&mut t, 1, now);
    denied(&mut t, now);
    assert_eq!(t.totals().pairs_up, 0);
    assert!(
        t.d.poll_connect(at(now, 4_999)).is_none(),
        "half the wait at least"
    );
    let now = at(now, 10_000);
    reconnected(&mut t, now);
    // The bundle goes again on it, and is refused again: twice the wait.
    denied(&mut t, now);
    assert!(
        t.d.poll_connect(at(now, 9_999)).is_none(),
        "ten seconds at least now"
    );
    let now = at(now, 20_000);
    reconnected(&mut t, now);
    assert!(sends(&mut t, now));
    t.answer(now);
    assert_eq!(t.totals().delivered, 1);
    // Answered: the next refusal waits ten seconds again.
    let now = at(now, 20);
    send(&mut t, 2, now);
    denied(&mut t, now);
    let now = at(now, 10_000);
    reconnected(&mut t, now);
    let s = t.totals();
    assert_eq!((s.admitted, s.delivered, s.in_flight), (2, 1, 1), "{s:?}");
}

/// A source refused (PERMISSION_DENIED) whose pair a reload retired while it was closing, then
/// listed again, starts over: it connects at once, and when that connection later drops for
/// an ordinary reason it reconnects after the usual back-off, not after the refusal's wait
/// of seconds, which was for a source the config has since dropped and taken back.
#[test]
fn a_refused_source_retired_and_listed_again_reconnects_after_the_usual_back_off() {
    use bundle_relay::relay::tuning::Tuning;
    let (mut t, spec, now) = one_region(10, 600_000);
    send(&mut t, 1, now);
    assert!(sends(&mut t, now), "the bundle went");
    t.answer_error(7, "source not allowed", now);
    let mut none = Tuning::of_spec(&spec);
    none.sources.clear();
    t.d.retune(&none, now);
    while let Some(p) = t.d.poll_close() {
        t.d.socket_released(p, now, 0);
    }
    let later = at(now, 60_000);
    t.d.dispatch(later);
    assert!(t.d.poll_connect(later).is_none(), "retired, it stays down");
    t.d.retune(&Tuning::of_spec(&spec), later);
    reconnected(&mut t, later);
    assert_eq!(t.totals().pairs_up, 1);
    // The engine closes the connection: an ordinary loss.
    let drop = at(later, 5);
    t.d.socket_released(t.pair, drop, 0);
    assert!(
        t.d.poll_connect(at(drop, 2_000)).is_some(),
        "reconnects within the usual back-off"
    );
}

// ---- an engine whose flow control holds a bundle back ----

/// The engine's SETTINGS with every stream's window at `window`.
fn stream_windows(window: u32) -> Vec<u8> {
    let mut f = vec![0; 9 + 6];
    bundle_relay::h2::frame::write_settings(
        &mut f,
        &[(
            bundle_relay::h2::frame::SETTINGS_INITIAL_WINDOW_SIZE,
            window,
        )],
    )
    .unwrap();
    f
}

/// An engine whose flow control holds a bundle's body past the bundle's max age: the call is
/// given up unsent at the max age (the stream reset) and the bundle expires, so what the
/// engine's window allows later carries none of it, and no answer makes it delivered late.
#[test]
fn a_bundle_the_engines_flow_control_holds_past_its_max_age_expires_unsent() {
    let (mut t, _, now) = one_region(10, 1_000);
    t.d.received(t.pair, &stream_windows(0), now);
    t.flush(now);
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    assert!(
        sends(&mut t, now),
        "its HEADERS go; its body waits for the window"
    );
    t.d.file_timers();
    assert!(
        t.d.next_deadline().is_some_and(|d| d.0 <= at(now, 1_001).0),
        "the loop wakes at the max age"
    );
    let late = at(now, 1_001);
    t.d.run_timers(late);
    t.d.dispatch(late);
    t.flush(late);
    t.d.received(t.pair, &stream_windows(65_535), late);
    t.flush(late);
    t.answer(late);
    let s = t.totals();
    assert_eq!((s.delivered, s.expired, s.in_flight), (0, 1, 0), "{s:?}");
    // The engine answered its SETTINGS and PINGs all along: the connection stays, in rotation.
    assert_eq!((s.disconnects, s.pairs_up), (0, 1), "{s:?}");
    assert!(t.d.check_accounting());
}
