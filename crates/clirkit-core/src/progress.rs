//! Progress bars for long work. Hidden when stderr is not a terminal or when asked to be quiet,
//! so logs and CI output stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar over `total` items (or a spinner when the total is unknown).
pub fn bar(total: Option<u64>, message: &str, quiet: bool) -> ProgressBar {
    let pb = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    if quiet || !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
        return pb;
    }
    let template = if total.is_some() {
        "{msg:>12} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec}, eta {eta})"
    } else {
        "{msg:>12} [{elapsed_precise}] {spinner} {human_pos} ({per_sec})"
    };
    pb.set_style(ProgressStyle::with_template(template).expect("static template is valid"));
    pb.set_message(message.to_string());
    pb
}
