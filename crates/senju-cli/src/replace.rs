//! Replacing a file whole: `rebuild`, `check --repair`, `import --truncate` and `export`
//! write a new file beside the one they replace and rename it into place, so that a reader
//! sees the old file or the new one, never a mix, and an error leaves the old one as it was.
//!
//! A path may be a symbolic link: the file replaced is the one it points to ([`target`]),
//! and the new file is written in that file's directory (a rename cannot cross file
//! systems, and renaming over the link would turn it into a regular file while the real
//! file stays as it was). The new file gets the old one's mode and, where this process may,
//! its owner ([`keep_owner_and_mode`]); the directory is synced after the rename
//! ([`sync_dir`]) so that the rename itself survives a crash.

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

/// Gives the new file `to` the permissions of `from` and, where this process may, its owner
/// and group, so that replacing `from` changes who may open it in no way.
pub(crate) fn keep_owner_and_mode(from: &Path, to: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(from).map_err(|e| format!("{}: {e}", from.display()))?;
    std::fs::set_permissions(to, m.permissions())
        .map_err(|e| format!("cannot set the permissions of the copy {}: {e}", to.display()))?;
    let (uid, gid) = (m.uid(), m.gid());
    let mine = std::fs::metadata(to).map_err(|e| format!("{}: {e}", to.display()))?;
    if (mine.uid(), mine.gid()) != (uid, gid) {
        std::os::unix::fs::chown(to, Some(uid), Some(gid)).map_err(|e| {
            format!(
                "cannot give the copy {} the owner {uid}:{gid} of {}: {e}",
                to.display(),
                from.display()
            )
        })?;
    }
    Ok(())
}

/// A new file being written beside the one it will replace: removed when dropped unless
/// [`Staged::put_in_place`] moved it into place.
pub(crate) struct Staged {
    pub(crate) path: PathBuf,
    done: bool,
}

impl Staged {
    /// The new file for `target` (a path [`target`] resolved): `TARGET.TAG-PID`.
    pub(crate) fn beside(target: &Path, tag: &str) -> Staged {
        Staged { path: with_suffix(target, &format!(".{tag}-{}", std::process::id())), done: false }
    }

    /// Renames the new file over `target` and syncs the directory.
    pub(crate) fn put_in_place(mut self, target: &Path) -> Result<(), String> {
        std::fs::rename(&self.path, target).map_err(|e| {
            format!(
                "cannot put the new file {} in place of {}: {e}",
                self.path.display(),
                target.display()
            )
        })?;
        self.done = true;
        sync_dir(target);
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
