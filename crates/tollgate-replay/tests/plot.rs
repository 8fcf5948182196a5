//! A replay's refusals over time per tier and per route (issue #27): each
//! group's requests per minute, and the picture's panels by configuration,
//! by tier and by route, configurations side by side. Counts by hand.

use tollgate_core::Fingerprinter;
use tollgate_gateway::config::ServeConfig;
use tollgate_replay::{
    Candidate, Format, NginxKey, Options, PlotBy, Replayer, Report, Source, plot_panels, replay,
};

/// A plan of `limit` a minute (a fixed window); routes `/a` and `/b`, `/b`
/// with a budget of its own of 1 at once per key (1 a minute).
fn candidate(name: &str, limit: u64) -> Candidate {
    let config = ServeConfig::from_toml_str(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow_s = 60\n\
         [[routes]]\nname = \"a\"\nprefix = \"/a\"\nupstream = \"http://127.0.0.1:1\"\n\
         [[routes]]\nname = \"b\"\nprefix = \"/b\"\nupstream = \"http://127.0.0.1:1\"\n\
         rpm = 1\n"
    ))
    .unwrap();
    let fingerprints = Fingerprinter::new(None);
    Candidate {
        name: name.to_owned(),
        replayer: Replayer::new(&config, &fingerprints).unwrap(),
        fingerprints,
    }
}

/// Key k1: at 09:00, three on `/a` and two on `/b`; at 09:02, one on `/b`.
fn report() -> Report {
    let line = |time: &str, path: &str| {
        format!(
            "10.0.0.1 - k1 [05/Dec/2024:09:{time} +0000] \"GET {path} HTTP/1.1\" 200 2 \"-\" \
             \"curl\"\n"
        )
    };
    let log = [
        line("00:01", "/a"),
        line("00:02", "/a"),
        line("00:03", "/b"),
        line("00:04", "/a"),
        line("00:05", "/b"),
        line("02:00", "/b"),
    ]
    .concat();
    replay(
        vec![Source {
            name: "log".to_owned(),
            reader: Box::new(std::io::Cursor::new(log.into_bytes())),
        }],
        &Format::Nginx(NginxKey::parse("remote_user").unwrap()),
        &[candidate("three", 3), candidate("ten", 10)],
        Options::default(),
    )
}

/// 2024-12-05T09:00:00Z in minutes since the epoch: 1733389200 / 60.
const NINE: u64 = 28_889_820;

#[test]
fn each_tier_and_route_counts_its_requests_per_minute() {
    let report = report();
    let three = &report.configs[0];
    // A plan of 3 a minute: at 09:00, /a, /a, /b pass; /a and /b (the
    // 4th and 5th) are refused. /b's budget of 1 refuses nothing more.
    // At 09:02, /b passes.
    assert_eq!(three.overall.per_minute, [(NINE, 3, 2), (NINE + 2, 1, 0)]);
    assert_eq!(three.routes["a"].per_minute, [(NINE, 2, 1)]);
    assert_eq!(
        three.routes["b"].per_minute,
        [(NINE, 1, 1), (NINE + 2, 1, 0)]
    );
    assert_eq!(three.tiers["default"].per_minute, three.overall.per_minute);
    // A plan of 10: /b's own budget refuses its second at 09:00.
    let ten = &report.configs[1];
    assert_eq!(ten.overall.per_minute, [(NINE, 4, 1), (NINE + 2, 1, 0)]);
    assert_eq!(ten.routes["a"].per_minute, [(NINE, 3, 0)]);
    assert_eq!(ten.routes["b"].per_minute, [(NINE, 1, 1), (NINE + 2, 1, 0)]);
}

#[test]
fn the_picture_has_a_panel_per_configuration_tier_or_route() {
    let report = report();
    // (title, [(start_ms, allowed, refused)]) of each panel.
    let panels = |by: PlotBy| {
        let plotted = plot_panels(&report, by);
        assert_eq!((plotted.step_ms, plotted.groups_left_out), (60_000, 0));
        plotted
            .panels
            .into_iter()
            .map(|panel| {
                let steps: Vec<(u64, u64, u64)> = panel
                    .buckets
                    .iter()
                    .map(|bucket| (bucket.start_ms, bucket.allowed, bucket.refused))
                    .collect();
                (panel.title, steps)
            })
            .collect::<Vec<_>>()
    };
    let steps = |first: (u64, u64), third: (u64, u64)| {
        vec![
            (0, first.0, first.1),
            (60_000, 0, 0),
            (120_000, third.0, third.1),
        ]
    };
    assert_eq!(
        panels(PlotBy::Overall),
        [
            (
                "three: 2 of 6 refused (33.33%)".to_owned(),
                steps((3, 2), (1, 0))
            ),
            (
                "ten: 1 of 6 refused (16.67%)".to_owned(),
                steps((4, 1), (1, 0))
            ),
        ]
    );
    // Routes, the most refused first (b: 2, a: 1), each configuration's
    // in turn; every panel on the same three minutes.
    assert_eq!(
        panels(PlotBy::Route),
        [
            (
                "three, route b: 1 of 3 refused (33.33%)".to_owned(),
                steps((1, 1), (1, 0))
            ),
            (
                "ten, route b: 1 of 3 refused (33.33%)".to_owned(),
                steps((1, 1), (1, 0))
            ),
            (
                "three, route a: 1 of 3 refused (33.33%)".to_owned(),
                steps((2, 1), (0, 0))
            ),
            (
                "ten, route a: 0 of 3 refused (0.00%)".to_owned(),
                steps((3, 0), (0, 0))
            ),
        ]
    );
    let tiers = panels(PlotBy::Tier);
    assert_eq!(tiers.len(), 2);
    assert_eq!(tiers[0].0, "three, tier default: 2 of 6 refused (33.33%)");
    assert_eq!(tiers[1].0, "ten, tier default: 1 of 6 refused (16.67%)");
}
