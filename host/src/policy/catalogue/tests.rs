use super::*;

#[test]
fn the_bundled_data_has_real_types_and_us_east_1_prices() {
    let catalogue = InstanceCatalogue::bundled("us-east-1").unwrap();
    assert!(catalogue.len() > 1000, "{} types", catalogue.len());
    let m5 = catalogue.get("m5.large").unwrap();
    assert_eq!((m5.vcpus, m5.memory_mib, m5.gpus), (2, 8192, 0));
    assert_eq!(m5.family, "m5");
    assert_eq!(m5.architecture, Architecture::Amd64);
    assert_eq!(m5.on_demand_price, Some(0.096));
    let p5 = catalogue.get("p5.48xlarge").unwrap();
    assert_eq!((p5.vcpus, p5.gpus), (192, 8));
    assert_eq!(p5.gpu_model.as_deref(), Some("NVIDIA H100"));
    assert_eq!(
        catalogue.get("m7g.large").unwrap().architecture,
        Architecture::Arm64
    );
    assert!(catalogue.sources().contains("moto"));
}

#[test]
fn a_region_without_bundled_prices_uses_the_stand_in() {
    let catalogue = InstanceCatalogue::bundled("eu-west-3").unwrap();
    assert_eq!(catalogue.region(), "eu-west-3");
    assert_eq!(catalogue.price_region(), "us-east-1");
    assert!(catalogue.get("m5.large").unwrap().on_demand_price.is_some());
}

#[test]
fn queries_filter_host_side_and_answer_cheapest_first() {
    let catalogue = InstanceCatalogue::bundled("us-east-1").unwrap();
    let found = catalogue.query(&InstanceQuery {
        min_vcpus: 4,
        min_memory_mib: 16 * 1024,
        architecture: Some(Architecture::Arm64),
        exclude_families: vec!["a1".to_owned()],
        limit: 5,
        ..any_query()
    });
    assert_eq!(found.len(), 5);
    for t in &found {
        assert!(t.vcpus >= 4 && t.memory_mib >= 16 * 1024, "{t:?}");
        assert_eq!(t.architecture, Architecture::Arm64);
        assert_ne!(t.family, "a1");
    }
    let prices: Vec<f64> = found.iter().map(|t| t.on_demand_price.unwrap()).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");

    let gpus = catalogue.query(&InstanceQuery {
        min_gpus: 8,
        families: vec!["p5".to_owned()],
        ..any_query()
    });
    assert!(!gpus.is_empty());
    assert!(gpus.iter().all(|t| t.family == "p5" && t.gpus >= 8));

    let named = catalogue.query(&InstanceQuery {
        names: vec!["m5.large".to_owned(), "no.such".to_owned()],
        ..any_query()
    });
    assert_eq!(named.len(), 1);
}

#[test]
fn unknown_prices_sort_last() {
    let catalogue = InstanceCatalogue::bundled("us-east-1").unwrap();
    let all = catalogue.query(&any_query());
    let first_unpriced = all.iter().position(|t| t.on_demand_price.is_none());
    if let Some(first) = first_unpriced {
        assert!(all[first..].iter().all(|t| t.on_demand_price.is_none()));
    }
}

#[test]
fn spot_prices_are_replaced_as_a_whole() {
    let catalogue = InstanceCatalogue::bundled("us-east-1").unwrap();
    let prices = HashMap::from([
        ("m5.large".to_owned(), 0.035),
        ("c5.large".to_owned(), f64::NAN),
    ]);
    catalogue.set_spot_prices(&prices);
    assert_eq!(catalogue.get("m5.large").unwrap().spot_price, Some(0.035));
    assert_eq!(catalogue.get("c5.large").unwrap().spot_price, None);
    catalogue.set_spot_prices(&HashMap::new());
    assert_eq!(catalogue.get("m5.large").unwrap().spot_price, None);
}

#[test]
fn a_spec_refresh_keeps_prices_adds_new_types_and_drops_withdrawn_ones() {
    let catalogue = InstanceCatalogue::bundled("us-east-1").unwrap();
    let spec = |name: &str, vcpus| TypeSpec {
        name: name.to_owned(),
        vcpus,
        memory_mib: 8192,
        gpus: 0,
        gpu_model: None,
        architecture: Architecture::Amd64,
    };
    assert_eq!(catalogue.update_specs(&[]), 0);
    assert!(catalogue.len() > 1000, "an empty report changes nothing");
    let added = catalogue.update_specs(&[spec("m5.large", 2), spec("m99.large", 4)]);
    assert_eq!(added, 1);
    assert_eq!(catalogue.len(), 2);
    assert_eq!(
        catalogue.get("m5.large").unwrap().on_demand_price,
        Some(0.096)
    );
    let new = catalogue.get("m99.large").unwrap();
    assert_eq!(
        (new.family.as_str(), new.vcpus, new.on_demand_price),
        ("m99", 4, None)
    );
    assert!(catalogue.get("p5.48xlarge").is_none());
    let order: Vec<String> = catalogue
        .query(&any_query())
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(order, ["m5.large", "m99.large"], "unpriced types sort last");
}

#[test]
fn zone_queries_keep_types_offered_there_and_types_whose_zones_are_unknown() {
    let catalogue = InstanceCatalogue::bundled("us-east-1").unwrap();
    let offerings: HashMap<String, Vec<String>> = [
        ("m7i.large", vec!["us-east-1b", "us-east-1a", "us-east-1a"]),
        ("m7g.large", vec!["us-east-1c"]),
    ]
    .into_iter()
    .map(|(name, zones)| {
        (
            name.to_owned(),
            zones.into_iter().map(str::to_owned).collect(),
        )
    })
    .collect();
    assert_eq!(catalogue.set_zones(&offerings), 2);
    assert_eq!(
        catalogue.get("m7i.large").unwrap().zones,
        ["us-east-1a", "us-east-1b"],
        "sorted and without repeats"
    );
    let named = |zones: &[&str]| -> Vec<String> {
        catalogue
            .query(&InstanceQuery {
                names: vec!["m7i.large".into(), "m7g.large".into(), "c7i.large".into()],
                zones: zones.iter().map(|z| (*z).to_owned()).collect(),
                ..any_query()
            })
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    let mut found = named(&["us-east-1a"]);
    found.sort();
    assert_eq!(
        found,
        ["c7i.large", "m7i.large"],
        "c7i.large's zones are unknown"
    );
    let mut found = named(&[]);
    found.sort();
    assert_eq!(found, ["c7i.large", "m7g.large", "m7i.large"]);
    let mut found = named(&["us-east-1c", "us-east-1b"]);
    found.sort();
    assert_eq!(found, ["c7i.large", "m7g.large", "m7i.large"]);

    // An empty answer (no permission, say) keeps what was known.
    assert_eq!(catalogue.set_zones(&HashMap::new()), 0);
    assert_eq!(catalogue.get("m7g.large").unwrap().zones, ["us-east-1c"]);
}

/// Issue 46: a spot pod's catalogue query ordered by the on-demand price, so a plugin taking
/// the first types missed the cheapest spot ones.
#[test]
fn a_query_orders_by_the_price_of_the_market_asked() {
    let catalogue = InstanceCatalogue::bundled("us-east-1").unwrap();
    // On demand m5.large < c5.xlarge < m5.xlarge; spot the other way round, r5.large has none.
    catalogue.set_spot_prices(
        &[
            ("m5.large".to_owned(), 0.060),
            ("c5.xlarge".to_owned(), 0.050),
            ("m5.xlarge".to_owned(), 0.040),
        ]
        .into(),
    );
    let names =
        |types: Vec<InstanceType>| -> Vec<String> { types.into_iter().map(|t| t.name).collect() };
    let named = InstanceQuery {
        names: ["r5.large", "m5.large", "c5.xlarge", "m5.xlarge"]
            .map(str::to_owned)
            .to_vec(),
        ..any_query()
    };
    let on_demand = names(catalogue.query(&named));
    assert_eq!(
        on_demand,
        ["m5.large", "r5.large", "c5.xlarge", "m5.xlarge"]
    );
    for (case, market, query, expected) in [
        (
            "on demand: the catalogue's order",
            Market::OnDemand,
            named.clone(),
            on_demand.iter().map(String::as_str).collect::<Vec<_>>(),
        ),
        (
            "spot: cheapest spot first, a type without a spot price last",
            Market::Spot,
            named.clone(),
            vec!["m5.xlarge", "c5.xlarge", "m5.large", "r5.large"],
        ),
        (
            "spot with a limit takes the cheapest spot types",
            Market::Spot,
            InstanceQuery {
                limit: 2,
                ..named.clone()
            },
            vec!["m5.xlarge", "c5.xlarge"],
        ),
        (
            "spot over the whole catalogue starts with the cheapest spot type",
            Market::Spot,
            InstanceQuery {
                limit: 1,
                ..any_query()
            },
            vec!["m5.xlarge"],
        ),
    ] {
        assert_eq!(
            names(catalogue.query_in(&query, market)),
            expected,
            "{case}"
        );
    }
}

#[test]
fn a_pod_asking_for_spot_gets_queries_in_spot_order_through_the_plugin_seam() {
    use market_order::{asked_market, in_market};
    let catalogue = Arc::new(InstanceCatalogue::bundled("us-east-1").unwrap());
    catalogue.set_spot_prices(&[("m5.xlarge".to_owned(), 0.010)].into());
    let pod = |annotation: Option<(&str, &str)>| {
        let mut pod = k8s_openapi::api::core::v1::Pod::default();
        pod.metadata.annotations =
            annotation.map(|(key, value)| [(key.to_owned(), value.to_owned())].into());
        pod
    };
    let launch_type = market_order::LAUNCH_TYPE_ANNOTATION;
    let query = InstanceQuery {
        names: vec!["m5.large".to_owned(), "m5.xlarge".to_owned()],
        ..any_query()
    };
    let shared: Arc<dyn CatalogueQuery> = catalogue;
    for (annotation, asked, first) in [
        (Some((launch_type, "spot")), Some(Market::Spot), "m5.xlarge"),
        (
            Some((launch_type, "on-demand")),
            Some(Market::OnDemand),
            "m5.large",
        ),
        (None, None, "m5.large"),
        (Some((launch_type, "cheapest")), None, "m5.large"),
        (
            Some((market_order::MAX_SPOT_PRICE_ANNOTATION, "0.05")),
            Some(Market::Spot),
            "m5.xlarge",
        ),
    ] {
        let market = asked_market(&pod(annotation));
        assert_eq!(market, asked, "{annotation:?}");
        assert_eq!(
            in_market(&shared, market).query(&query)[0].name,
            first,
            "{annotation:?}"
        );
    }
}
