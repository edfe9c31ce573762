//! The command line of `senju`, declared with `clap`: the everyday commands in the style of
//! `tkrzw_dbm_util`, plus `perf` and `lab`, which parse their own flags (`perf` keeps
//! `tkrzw_dbm_perf`'s spellings, such as `--random_key`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "senju",
    version,
    about = "senju: the command-line tool of the senju database",
    long_about = "senju: the command-line tool of the senju database.\n\n\
        Reading commands (get, count, list, export, stats, check) open the file read-only \
        under a shared lock, so any number of them run at once; writing commands need the \
        file to themselves. Errors print one line starting with `senju:` on standard error \
        and exit with a non-zero status.",
    after_help = "Examples:\n  \
        senju set casket.sj apple red\n  \
        senju get casket.sj apple\n  \
        senju list casket.sj --prefix app --limit 10\n  \
        senju import casket.sj records.tsv\n  \
        senju export casket.sj backup.jsonl\n  \
        senju check casket.sj --repair\n  \
        senju perf sequence --iter 1000000 --threads 4\n  \
        senju completions bash > /etc/bash_completion.d/senju",
    arg_required_else_help = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The format of an import or export file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Escaped tab-separated values: `KEY<TAB>VALUE` per line.
    Tsv,
    /// JSON Lines: `{"key":...,"value":...}` per line.
    Jsonl,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Prints the value of a key.
    #[command(after_help = "The value is printed as it is, followed by a newline. A missing \
        key is an error (exit status 1).\n\nExamples:\n  \
        senju get casket.sj apple\n  \
        senju get casket.sj apple --json")]
    Get {
        /// The database file.
        path: PathBuf,
        /// The key (any bytes the shell can pass).
        key: OsString,
        /// Prints `{"key":...,"value":...}` (a field that is not UTF-8 is `{"base64":...}`).
        #[arg(long)]
        json: bool,
    },
    /// Sets the value of a key (creating the database if needed).
    #[command(after_help = "Examples:\n  \
        senju set casket.sj apple red\n  \
        senju set casket.sj apple ' and round' --append\n  \
        senju set casket.sj pear green --no-overwrite")]
    Set {
        /// The database file.
        path: PathBuf,
        /// The key.
        key: OsString,
        /// The value.
        value: OsString,
        /// Fails if the key already has a value.
        #[arg(long, alias = "no_overwrite", conflicts_with = "append")]
        no_overwrite: bool,
        /// Appends to the existing value instead of replacing it.
        #[arg(long)]
        append: bool,
    },
    /// Removes a key.
    #[command(after_help = "A missing key is an error (exit status 1).\n\nExample:\n  \
        senju remove casket.sj apple")]
    Remove {
        /// The database file.
        path: PathBuf,
        /// The key.
        key: OsString,
    },
    /// Prints the number of records.
    #[command(after_help = "Examples:\n  senju count casket.sj\n  senju count casket.sj --json")]
    Count {
        /// The database file.
        path: PathBuf,
        /// Prints `{"count":N}`.
        #[arg(long)]
        json: bool,
    },
    /// Lists records as escaped TSV (the format of `export`), in storage order.
    #[command(after_help = "Records come in storage (hash) order; `--prefix` still scans \
        the whole database.\n\nExamples:\n  \
        senju list casket.sj --limit 10\n  \
        senju list casket.sj --prefix user: --keys\n  \
        senju list casket.sj --json | jq .value")]
    List {
        /// The database file.
        path: PathBuf,
        /// Lists only keys starting with these bytes.
        #[arg(long, value_name = "BYTES")]
        prefix: Option<OsString>,
        /// Lists at most this many records.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Prints keys only.
        #[arg(long)]
        keys: bool,
        /// Prints JSON Lines (the format of `export --format jsonl`).
        #[arg(long)]
        json: bool,
    },
    /// Verifies the whole file; with --repair, salvages every intact record.
    #[command(after_help = "Checks the file header, every chunk and record checksum, and \
        (for a cleanly closed file) that every index entry points at the live record of its \
        key and that the counts match. Exits with status 1 naming the first damage (byte \
        offset and what) if anything is wrong.\n\n\
        --repair copies every intact record into a fresh file, replaces the damaged file \
        with it and keeps the damaged one as PATH.broken, then says how many records were \
        kept and how much was skipped.\n\nExamples:\n  \
        senju check casket.sj\n  \
        senju check casket.sj --json\n  \
        senju check casket.sj --repair")]
    Check {
        /// The database file.
        path: PathBuf,
        /// Salvages the intact records into a fresh file if any damage is found.
        #[arg(long)]
        repair: bool,
        /// Prints the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compacts the file: drops overwritten and removed records, resizes the index.
    #[command(after_help = "By default the live records are copied into a fresh file beside \
        the database (PATH.rebuild-PID), which then replaces it: the file ends as short as its \
        data, and the copy needs that much free disk space while it runs. --in-place rebuilds \
        inside the file instead: it needs no room for a copy, but the file does not get \
        shorter (the space it frees is reused by later writes).\n\nExamples:\n  senju \
        rebuild casket.sj\n  senju rebuild casket.sj --in-place")]
    Rebuild {
        /// The database file.
        path: PathBuf,
        /// Rebuilds inside the file (no copy; the file keeps its length).
        #[arg(long)]
        in_place: bool,
    },
    /// Imports records from a TSV or JSON Lines file (creating the database if needed).
    #[command(after_help = "FILE `-` reads standard input. The format comes from --format, \
        else from the file name (.jsonl, .ndjson or .json: JSON Lines; anything else: TSV). \
        See `senju export --help` for the escaping.\n\n\
        A bad line stops the import: without --truncate the records before it stay (the \
        error says how many); with --truncate the database is left as it was (except where \
        the database can be written but not replaced, e.g. in /tmp and owned by another \
        user: there --truncate empties it in place). PATH is never overwritten if it is not a \
        senju database: to import into a fresh database at that path, remove or rename the \
        file first.\n\nExamples:\n  \
        senju import casket.sj records.tsv\n  \
        senju import casket.sj records.jsonl --truncate\n  \
        gzip -dc dump.tsv.gz | senju import casket.sj - --format tsv")]
    Import {
        /// The database file.
        path: PathBuf,
        /// The record file (`-`: standard input).
        file: PathBuf,
        /// The record format (default: from the file name).
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// Replaces every record: imports into a fresh file beside the database, which
        /// replaces it only once the whole input is in (needs disk room for that copy).
        #[arg(long)]
        truncate: bool,
    },
    /// Exports every record to a TSV or JSON Lines file.
    #[command(after_help = "Both formats are binary-safe: any key and value round-trips \
        byte for byte through export and import.\n\n\
        TSV: `KEY<TAB>VALUE` per line; `\\` is written `\\\\`; TAB, LF, CR and NUL are \
        `\\t`, `\\n`, `\\r`, `\\0`; other control bytes, DEL and bytes that are not valid \
        UTF-8 are `\\xHH`; everything else is written as it is.\n\
        JSON Lines: `{\"key\":K,\"value\":V}` per line, K and V JSON strings; a field that \
        is not valid UTF-8 is written as `key_base64` / `value_base64` (standard base64) \
        instead.\n\nFILE `-` writes standard output. A file is written beside its old version \
        and replaces it only when the export is complete, so a failed export leaves it \
        as it was (it keeps its mode and, where you may set it, its owner; other hard \
        links to it keep the old records: export to - and redirect to write it in place). \
        A FILE you may not write is refused; one you may write but not replace (its \
        directory is not writable, or sticky and FILE someone else's) is written in place. \
        FILE cannot be the database itself. With --sort the records come in byte \
        order of their keys (so two exports of the same data are identical files); this \
        holds every record in memory.\n\nExamples:\n  \
        senju export casket.sj backup.tsv\n  \
        senju export casket.sj backup.jsonl --sort\n  \
        senju export casket.sj - --format jsonl | head")]
    Export {
        /// The database file.
        path: PathBuf,
        /// The record file (`-`: standard output).
        file: PathBuf,
        /// The record format (default: from the file name).
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// Writes records in key order.
        #[arg(long)]
        sort: bool,
        /// Writes keys only (such a file cannot be imported).
        #[arg(long)]
        keys: bool,
    },
    /// Prints counters: records, shards, file, index and record bytes.
    #[command(after_help = "Examples:\n  senju stats casket.sj\n  senju stats casket.sj --json")]
    Stats {
        /// The database file.
        path: PathBuf,
        /// Prints the counters as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Prints a shell completion script.
    #[command(after_help = "Examples:\n  \
        senju completions bash > ~/.local/share/bash-completion/completions/senju\n  \
        senju completions zsh > ~/.zfunc/_senju\n  \
        senju completions fish > ~/.config/fish/completions/senju.fish")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Performance checks that match tkrzw_dbm_perf (`senju perf --help` for the flags).
    #[command(disable_help_flag = true)]
    Perf {
        /// The workload and its flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The founding experiments, measured on this machine (`senju lab --help`).
    #[command(disable_help_flag = true)]
    Lab {
        /// The experiment and its flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn perf_and_lab_get_their_flags_raw() {
        let cli = Cli::try_parse_from(["senju", "perf", "sequence", "--random_key", "--help"]);
        let Command::Perf { args } = cli.unwrap().command else { panic!("not perf") };
        assert_eq!(args, ["sequence", "--random_key", "--help"]);
        let cli = Cli::try_parse_from(["senju", "lab", "rwlock", "--quick"]).unwrap();
        assert!(matches!(cli.command, Command::Lab { args } if args == ["rwlock", "--quick"]));
    }
}
