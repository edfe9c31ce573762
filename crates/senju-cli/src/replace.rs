//! Replacing a file whole: `rebuild`, `check --repair`, `import --truncate` and `export`
//! write a new file beside the one they replace and rename it into place, so that a reader
//! sees the old file or the new one, never a mix, and an error leaves the old one as it was.
//!
//! A path may be a symbolic link: the file replaced is the one it points to ([`target`]),
//! and the new file is written in that file's directory (a rename cannot cross file
//! systems, and renaming over the link would turn it into a regular file while the real
//! file stays as it was). The new file is created by this process ([`Staged::beside`]),
//! readable by its owner only while it fills; once complete it gets the old one's mode and,
//! where this process may, its owner ([`keep_owner_and_mode`]), and the directory is synced
//! after the rename ([`sync_dir`]) so that the rename itself survives a crash.

use std::fs::File;
use std::path::{Path, PathBuf};

/// `path` with `suffix` appended to its file name.
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The file `path` names once every symbolic link on the way is followed, whether or not
/// that file exists yet (a link may point to a file not yet created).
pub(crate) fn target(path: &Path) -> Result<PathBuf, String> {
    // The directory part is resolved by the OS; only the last component is followed here,
    // link by link, each relative link against the directory of the link.
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)
                    .map_err(|e| format!("cannot follow the link {}: {e}", p.display()))?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(format!("{}: too many levels of symbolic links", path.display()))
}

/// Whether `a` and `b` name the same existing file (the same device and inode, after
/// following links: a symbolic or hard link to a file is that file).
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Syncs the directory holding `path`, so that a rename into it is durable (best effort:
/// some file systems refuse to sync a directory).
pub(crate) fn sync_dir(path: &Path) {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Gives the new file `to` the owner and group of `from` where this process may, then its
/// permissions, so that replacing `from` changes who may open it in no way a chown could
/// avoid. Only root may give a file away: anyone else keeps the file as their own (and
/// gets `from`'s group only if they belong to it), which is why a failed chown is no error.
/// The mode is set last because a chown clears the set-user-ID and set-group-ID bits.
pub(crate) fn keep_owner_and_mode(from: &Path, to: &Path) -> Result<(), String> {
    use std::io::ErrorKind::{InvalidInput, PermissionDenied};
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(from).map_err(|e| format!("{}: {e}", from.display()))?;
    let (uid, gid) = (m.uid(), m.gid());
    let mine = std::fs::metadata(to).map_err(|e| format!("{}: {e}", to.display()))?;
    if (mine.uid(), mine.gid()) != (uid, gid) {
        // EPERM: not root; EINVAL: an owner this user namespace cannot name.
        let not_allowed = |e: &std::io::Error| matches!(e.kind(), PermissionDenied | InvalidInput);
        match std::os::unix::fs::chown(to, Some(uid), Some(gid)) {
            Ok(()) => {}
            Err(e) if not_allowed(&e) => match std::os::unix::fs::chown(to, None, Some(gid)) {
                Err(e) if !not_allowed(&e) => return Err(chown_failed(from, to, &e)),
                _ => {}
            },
            Err(e) => return Err(chown_failed(from, to, &e)),
        }
    }
    std::fs::set_permissions(to, m.permissions())
        .map_err(|e| format!("cannot set the permissions of the copy {}: {e}", to.display()))
}

fn chown_failed(from: &Path, to: &Path, e: &std::io::Error) -> String {
    format!("cannot give the copy {} the owner of {}: {e}", to.display(), from.display())
}

/// Whether renaming a file over `target` is refused although its directory takes new
/// files: in a sticky directory (`/tmp`) only root, the directory's owner and the file's
/// owner may replace or remove it. `me` is this process's user.
fn sticky_refuses(target: &Path, me: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match (std::fs::metadata(dir), std::fs::symlink_metadata(target)) {
        (Ok(d), Ok(t)) => d.mode() & 0o1000 != 0 && me != 0 && me != d.uid() && me != t.uid(),
        _ => false,
    }
}

/// A new file being written beside the one it will replace: this process created it, and
/// it is removed when dropped unless [`Staged::put_in_place`] moved it into place (and by
/// an exit that skips destructors, an interrupt included: see `args::remove_temp_files`).
pub(crate) struct Staged {
    pub(crate) path: PathBuf,
    /// Open for writing since its creation: it can be synced whatever mode it gets.
    pub(crate) file: File,
    done: bool,
}

impl Staged {
    /// Creates the new file for `target` (a path [`target`] resolved), `TARGET.TAG-PID` or,
    /// where a file of that name exists (left by a crash, or by a process with the same id
    /// in another container), `TARGET.TAG-PID-N` for the first N free: a file this process
    /// did not create is never written, truncated or removed. While it fills, the file is
    /// readable by its owner only where `target` exists (it takes `target`'s owner and mode
    /// in [`Staged::put_in_place`], once complete); where `target` does not exist it gets
    /// the mode any new file gets (0666 less the umask). The engine opens such an empty
    /// file as a new database.
    pub(crate) fn beside(target: &Path, tag: &str) -> std::io::Result<Staged> {
        use std::os::unix::fs::OpenOptionsExt;
        let mode = if std::fs::symlink_metadata(target).is_ok() { 0o600 } else { 0o666 };
        let pid = std::process::id();
        for n in 1..=100 {
            let path = match n {
                1 => with_suffix(target, &format!(".{tag}-{pid}")),
                n => with_suffix(target, &format!(".{tag}-{pid}-{n}")),
            };
            match std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&path) {
                Ok(file) => {
                    crate::args::register_temp_file(&path);
                    return Ok(Staged { path, file, done: false });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{}.{tag}-{pid} and 99 more such names are taken", target.display()),
        ))
    }

    /// Whether this file may be renamed over `target` as far as permissions tell before
    /// trying (the sticky-directory rule; the directory is writable, since the file was
    /// created in it).
    pub(crate) fn may_replace(&self, target: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        // The new file's owner is this process's (file system) user.
        self.file.metadata().is_ok_and(|m| !sticky_refuses(target, m.uid()))
    }

    /// Gives the new file `target`'s owner and mode (where `target` exists), syncs it, renames
    /// it over `target` and syncs the directory.
    pub(crate) fn put_in_place(mut self, target: &Path) -> Result<(), String> {
        if std::fs::symlink_metadata(target).is_ok() {
            keep_owner_and_mode(target, &self.path)?;
        }
        // Data (the engine's close synced a database already) and the owner and mode, before
        // the name: a crash must not leave a new name on an incomplete file.
        self.file
            .sync_all()
            .map_err(|e| format!("cannot sync the new file {}: {e}", self.path.display()))?;
        std::fs::rename(&self.path, target).map_err(|e| {
            format!(
                "cannot put the new file {} in place of {}: {e}",
                self.path.display(),
                target.display()
            )
        })?;
        self.done = true;
        crate::args::forget_temp_file(&self.path);
        sync_dir(target);
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
            crate::args::forget_temp_file(&self.path);
        }
    }
}
