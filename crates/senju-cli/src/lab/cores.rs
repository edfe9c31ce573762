//! `senju lab cores`: founding document `000`, part 3. Do threads use more than one core in
//! each language found here?

use senju_bench::chart::{Chart, Panel, Series};
use senju_bench::cores::{CoresParams, Language, Outcome as Measured, SEED_2012, run as measure};

use super::table::{Table, spread};
use super::{Common, Outcome, progress, to_value};

pub(crate) fn run(c: &Common, languages: &[String]) -> Result<Outcome, String> {
    for l in languages {
        if !Language::ALL.iter().any(|k| k.name() == l) {
            let names: Vec<&str> = Language::ALL.iter().map(|k| k.name()).collect();
            return Err(format!("unknown language {l:?}; choose from {}", names.join(", ")));
        }
    }
    let params = CoresParams {
        threads: c.threads_or(&[1, 2, 4, 8], &[1, 2, 4, 8], &[1, 2, 4, 8]),
        target_ms: c.pick(25, 100, 1000),
        rounds: c.rounds_or(1, 3, 5),
        languages: languages.to_vec(),
    };
    let mut progress = progress();
    let report = measure(&params, &mut progress);
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut out = format!(
        "## Threads doing multiplications\n\nEach thread runs x = (x × 1103515245 + 12345) mod \
         2^32 the same number of times (sized so one thread takes ~{} ms); {} round(s). \
         Speedup = T × time(1) / time(T): T for perfect scaling (at most {cpus} here: {cpus} \
         CPUs), 1 when threads take turns on one core.\n\n",
        params.target_ms, params.rounds,
    );
    let mut headers: Vec<String> =
        vec!["language".into(), "version".into(), ">mults/thread".into()];
    for t in &params.threads {
        headers.push(format!(">T={t} s"));
    }
    for t in params.threads.iter().filter(|&&t| t != 1) {
        headers.push(format!(">speedup T={t}"));
    }
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut table = Table::new(&headers);
    let mut skipped = Vec::new();
    for l in &report.languages {
        if l.outcome == Measured::Skipped {
            skipped.push(format!(
                "- {}: skipped ({})",
                l.language.name(),
                l.reason.as_deref().unwrap_or("unknown reason")
            ));
            continue;
        }
        let mut row = vec![
            l.language.name().to_string(),
            l.version.clone().unwrap_or_default(),
            l.multiplications_per_thread.to_string(),
        ];
        row.extend(l.rows.iter().map(|r| spread(&r.seconds, |v| format!("{v:.3}"))));
        row.extend(l.rows.iter().filter(|r| r.threads != 1).map(|r| format!("{:.2}", r.speedup)));
        table.row(row);
    }
    out += &table.render();
    if !skipped.is_empty() {
        out += &format!("\n{}\n", skipped.join("\n"));
    }
    out += "\n## The 2012 figures (founding document 000: Core i7 860, 4 cores)\n\n";
    let mut table = Table::new(&[
        "language",
        ">mults/thread",
        ">T=1 s",
        ">T=8 s",
        ">speedup T=2",
        ">speedup T=4",
        ">speedup T=8",
    ]);
    for s in SEED_2012 {
        let sp = s.speedups();
        table.row(vec![
            s.language.into(),
            s.multiplications.to_string(),
            format!("{:.2}", s.seconds[0]),
            format!("{:.2}", s.seconds[3]),
            format!("{:.2}", sp[1]),
            format!("{:.2}", sp[2]),
            format!("{:.2}", sp[3]),
        ]);
    }
    out += &table.render();
    let mut series: Vec<Series> = report
        .languages
        .iter()
        .filter(|l| l.outcome == Measured::Measured)
        .map(|l| Series {
            name: l.language.name().to_string(),
            points: l.rows.iter().map(|r| (r.threads as f64, r.speedup)).collect(),
        })
        .collect();
    series.push(Series {
        name: format!("ideal on {cpus} CPUs"),
        points: params.threads.iter().map(|&t| (t as f64, t.min(cpus) as f64)).collect(),
    });
    Ok(Outcome {
        text: out,
        results: to_value(&report),
        chart: Some(Chart {
            title: "Do threads use several cores? Speedup of T threads of multiplications".into(),
            x_label: "threads".into(),
            panels: vec![Panel {
                subtitle: String::new(),
                y_label: "speedup: T × time(1) / time(T)".into(),
                log_y: false,
                series,
            }],
            y_from_zero: true,
        }),
    })
}
