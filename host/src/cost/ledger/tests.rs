use super::*;
use crate::cost::integrate::PricePoint;
use crate::cost::record::PriceSource;

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

fn price(usd: f64) -> Price {
    Price::from_usd(usd).unwrap()
}

fn seen(id: &str, market: Market, launched: i64) -> Seen {
    Seen {
        instance_id: id.to_owned(),
        namespace: "team-a".to_owned(),
        pod_uid: format!("uid-{id}"),
        pod_name: Some(format!("pod-{id}")),
        instance_type: "m5.large".to_owned(),
        market,
        zone: Some("us-west-2a".to_owned()),
        launched_at: t(launched),
        live: true,
        ended_at: None,
    }
}

fn ended(mut seen: Seen, at: Option<i64>) -> Seen {
    seen.live = false;
    seen.ended_at = at.map(t);
    seen
}

/// Spot at $0.04/h, $0.08/h from minute 30; on demand $0.096/h.
fn priced(seen: &Seen) -> Option<Priced> {
    let points = match seen.market {
        Market::Spot => vec![
            PricePoint {
                at: t(-60),
                price: price(0.04),
            },
            PricePoint {
                at: t(30),
                price: price(0.08),
            },
        ],
        Market::OnDemand => vec![PricePoint {
            at: seen.launched_at,
            price: price(0.096),
        }],
    };
    Some(Priced {
        pricing: Pricing {
            points,
            source: match seen.market {
                Market::Spot => PriceSource::SpotPriceHistory,
                Market::OnDemand => PriceSource::OnDemandCatalogue,
            },
        },
        on_demand: Some(price(0.096)),
    })
}

fn total(turns: &[Turn]) -> (f64, f64) {
    turns
        .iter()
        .flat_map(|turn| turn.accrued.values())
        .fold((0.0, 0.0), |(a, b), (c, d)| (a + c, b + d))
}

#[test]
fn the_counters_sum_to_the_record_of_an_instance_launched_while_counting() {
    let mut ledger = CostLedger::new(t(-100));
    let spot = seen("i-1", Market::Spot, 0);
    let turns = vec![
        ledger.turn(std::slice::from_ref(&spot), priced, t(20)),
        ledger.turn(std::slice::from_ref(&spot), priced, t(40)),
        ledger.turn(&[ended(spot.clone(), Some(60))], priced, t(61)),
    ];
    let (_, record) = &turns[2].ended[0];
    // 30 min at $0.04/h and 30 min at $0.08/h.
    assert!((record.dollars - 0.06).abs() < 1e-9, "{record:?}");
    assert!((record.hours - 1.0).abs() < 1e-9);
    assert_eq!(record.price_per_hour_at_launch, 0.04);
    assert_eq!(record.price_per_hour_at_end, 0.08);
    assert_eq!(record.ended_at, t(60), "EC2's end time, not the turn's");
    let (dollars, saved) = total(&turns);
    assert!((dollars - record.dollars).abs() < 1e-9, "{dollars}");
    assert!((saved - (0.096 - 0.06)).abs() < 1e-9, "{saved}");
    assert_eq!(
        turns[0].live.values().copied().sum::<Price>(),
        price(0.04),
        "live spend at the price now"
    );
    assert_eq!(turns[1].live.values().copied().sum::<Price>(), price(0.08));
    assert!(turns[2].live.is_empty());
}

#[test]
fn after_a_restart_the_record_is_the_same_and_the_counters_count_from_the_start() {
    let spot = seen("i-1", Market::Spot, 0);
    let mut before = CostLedger::new(t(-100));
    let whole = before.turn(&[ended(spot.clone(), Some(60))], priced, t(61));
    // The process restarted at minute 45: the record still runs from EC2's LaunchTime.
    let mut after = CostLedger::new(t(45));
    let since_restart = after.turn(&[ended(spot, Some(60))], priced, t(61));
    assert_eq!(whole.ended[0].1, since_restart.ended[0].1);
    let (dollars, _) = total(&[since_restart]);
    assert!(
        (dollars - 0.02).abs() < 1e-9,
        "15 min at $0.08/h: {dollars}"
    );
}

#[test]
fn an_instance_recorded_is_counted_no_more_and_one_ended_without_an_end_time_ends_when_seen() {
    let mut ledger = CostLedger::new(t(-100));
    let on_demand = seen("i-2", Market::OnDemand, 0);
    let first = ledger.turn(&[ended(on_demand.clone(), None)], priced, t(30));
    let (_, record) = &first.ended[0];
    assert_eq!(record.ended_at, t(30));
    assert!((record.dollars - 0.048).abs() < 1e-9);
    assert_eq!(record.on_demand_dollars, None);
    // The write failed: the next turn offers the same record again, ending when first seen.
    let again = ledger.turn(&[ended(on_demand.clone(), None)], priced, t(32));
    assert_eq!(again.ended[0].1.ended_at, t(30));
    assert_eq!(total(&[again]).0, 0.0, "nothing counted twice");
    ledger.mark_recorded("i-2");
    let after = ledger.turn(&[ended(on_demand, None)], priced, t(34));
    assert!(after.ended.is_empty() && after.accrued.is_empty());
    assert!(ledger.is_recorded("i-2"));
    // Gone from the listing: forgotten.
    ledger.turn(&[], priced, t(90));
    assert!(!ledger.is_recorded("i-2"));
}

#[test]
fn an_instance_with_no_price_is_named_and_counts_nothing() {
    let mut ledger = CostLedger::new(t(-100));
    let turn = ledger.turn(
        &[
            seen("i-3", Market::OnDemand, 0),
            seen("i-4", Market::Spot, 0),
        ],
        |_| None,
        t(30),
    );
    assert_eq!(turn.unpriced, ["m5.large"]);
    assert!(turn.accrued.is_empty() && turn.live.is_empty());
}

#[test]
fn the_counters_never_run_ahead_of_the_record_whatever_the_listings_timing() {
    let millis = |minutes: i64, ms: i64| t(minutes) + jiff::SignedDuration::from_millis(ms);
    let on_demand = seen("i-5", Market::OnDemand, 0);
    // (listings: (asked at, ended at EC2's whole second or live), what the counters hold)
    let cases = [
        // Listed live 400 ms into the second EC2 then gives as its end (it ended at 20:00.7,
        // EC2 says 20:00): live time counts to the second before the listing only.
        vec![(millis(20, 400), None), (millis(21, 0), Some(t(20)))],
        // A listing shared with the census, asked before the end and read after it.
        vec![(millis(19, 999), None), (millis(20, 500), Some(t(20)))],
        // A slow listing: asked at 30:00.2, the instance ended at 30:00.9 while it was asked.
        vec![(millis(29, 100), None), (millis(30, 200), Some(t(30)))],
        // Turns with no listing between: the last live one is long before the end.
        vec![(millis(5, 0), None), (millis(45, 700), Some(t(45)))],
    ];
    for listings in cases {
        let mut ledger = CostLedger::new(t(-100));
        let mut turns = Vec::new();
        for (at, end) in &listings {
            let shown = match end {
                Some(end) => Seen {
                    live: false,
                    ended_at: Some(*end),
                    ..on_demand.clone()
                },
                None => on_demand.clone(),
            };
            turns.push(ledger.turn(std::slice::from_ref(&shown), priced, *at));
        }
        let record = &turns.last().unwrap().ended[0].1;
        let (dollars, _) = total(&turns);
        assert!(
            (dollars - record.dollars).abs() < 1e-12,
            "{listings:?}: counted {dollars}, recorded {}",
            record.dollars
        );
    }
}
