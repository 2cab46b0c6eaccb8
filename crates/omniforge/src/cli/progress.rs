//! Long work shown on stderr while a one-shot command waits for it (dependency installs of
//! `tool add`, `tool edit`, `pack import`, ...): on a terminal, a spinner with the elapsed time
//! and the latest message (uv's own lines included); otherwise plain lines, one per message,
//! for logs and CI. stdout keeps only the command's result.

use std::io::{IsTerminal, Write as _};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use omniforge_server::ProgressSink;

/// The progress display of one command.
pub(super) struct Progress {
    /// `Some` on a terminal.
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A display on stderr: a spinner on a terminal, plain lines otherwise.
    pub(super) fn on_stderr() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {elapsed:>3} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress { bar }
    }

    /// Where the server library sends the messages.
    pub(super) fn sink(&self) -> ProgressSink {
        match &self.bar {
            Some(bar) => {
                let bar = bar.clone();
                Arc::new(move |message: &str| bar.set_message(message.to_owned()))
            }
            None => Arc::new(|message: &str| {
                // A closed stderr loses the line, never the command.
                let _ = writeln!(std::io::stderr().lock(), "{message}");
            }),
        }
    }

    /// Clears the spinner, so that what the command prints next stands alone.
    pub(super) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
