//! Progress of long benchmarks: a bar per preset on a terminal, plain lines in a log file.

/// One progress bar per preset, each naming the workload it is in. When stderr is not a terminal
/// (a run logged to a file), bars cannot be drawn: each preset then prints a plain line when it
/// starts a phase and at most every [`LOG_EVERY`] within one.
pub(crate) struct PresetBars {
    bars: std::collections::HashMap<String, indicatif::ProgressBar>,
    _multi: indicatif::MultiProgress,
    /// Per preset, for plain lines: its phase, when that started and when a line was last printed.
    lines: Option<std::sync::Mutex<std::collections::HashMap<String, PhaseLog>>>,
}

/// How often a preset prints its progress line when stderr is not a terminal.
const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

struct PhaseLog {
    phase: String,
    started: std::time::Instant,
    printed: std::time::Instant,
}

impl PresetBars {
    pub(crate) fn new(presets: &[String], quiet: bool) -> PresetBars {
        use std::io::IsTerminal;
        let multi = indicatif::MultiProgress::new();
        let terminal = std::io::stderr().is_terminal();
        if quiet || !terminal {
            multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let style = indicatif::ProgressStyle::with_template(
            "{prefix:>24} [{bar:40}] {pos}/{len} requests ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bars = presets
            .iter()
            .map(|preset| {
                let bar = multi.add(indicatif::ProgressBar::new(0));
                bar.set_style(style.clone());
                bar.set_prefix(format!("{preset} (waiting)"));
                (preset.clone(), bar)
            })
            .collect();
        PresetBars {
            bars,
            _multi: multi,
            lines: (!quiet && !terminal).then(Default::default),
        }
    }

    pub(crate) fn update(&self, preset: &str, workload: &str, done: u64, total: u64) {
        if let Some(bar) = self.bars.get(preset) {
            let prefix = format!("{preset} {workload}");
            if bar.prefix() != prefix {
                bar.set_prefix(prefix);
                bar.reset();
                bar.set_length(total);
            }
            bar.set_position(done);
        }
        if let Some(lines) = &self.lines {
            let mut lines = lines
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            log_progress(&mut lines, preset, workload, done, total);
        }
    }

    pub(crate) fn finish(&self) {
        for bar in self.bars.values() {
            bar.finish_and_clear();
        }
    }
}

/// Prints `preset`'s progress as one line if it entered a new phase or has not printed for
/// [`LOG_EVERY`]: requests done, the rate since the phase began and the time left at that rate.
fn log_progress(
    lines: &mut std::collections::HashMap<String, PhaseLog>,
    preset: &str,
    phase: &str,
    done: u64,
    total: u64,
) {
    let now = std::time::Instant::now();
    let log = lines.entry(preset.to_string()).or_insert_with(|| PhaseLog {
        phase: String::new(),
        started: now,
        printed: now,
    });
    if log.phase != phase {
        log.phase = phase.to_string();
        log.started = now;
        log.printed = now;
        eprintln!("{preset} {phase}: started, {total} requests");
        return;
    }
    if now.duration_since(log.printed) < LOG_EVERY {
        return;
    }
    log.printed = now;
    let seconds = now.duration_since(log.started).as_secs_f64();
    let rate = done as f64 / seconds.max(1e-9);
    let left = if rate > 0.0 {
        format!(
            ", about {:.0} s left",
            total.saturating_sub(done) as f64 / rate
        )
    } else {
        String::new()
    };
    eprintln!(
        "{preset} {phase}: {done}/{total} ({:.0}%), {rate:.0}/s{left}",
        100.0 * done as f64 / total.max(1) as f64
    );
}
