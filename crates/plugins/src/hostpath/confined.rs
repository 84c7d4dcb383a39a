//! Directory operations confined to an opened root, by descriptor.
//!
//! Why descriptors: a path checked first and opened later is resolved twice, and whoever can
//! write inside the tree can swap a directory for a symlink in between, so that a check made on
//! `ROOT/a/vol` is followed by a removal of `/elsewhere/vol`. Here every step opens exactly one
//! name relative to a directory already open, never following a symlink (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it, otherwise `openat` with
//! `O_NOFOLLOW | O_DIRECTORY` on a single component, which is the same guarantee), and every
//! removal is an `unlinkat` relative to the directory it was listed from. A name swapped for a
//! symlink mid-way makes the open fail with `ELOOP`/`ENOTDIR`; the symlink itself is then
//! unlinked, never its target.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::path::Path;

/// Called before each name is opened or removed (tests use it to race deterministically).
pub(super) type Hook<'a> = &'a (dyn Fn(&str) + Send + Sync);

const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// Opens the directory `name` (one component) under `dir`, following no symlink.
fn open_dir_at(dir: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, Errno> {
    if name.to_bytes().contains(&b'/') || matches!(name.to_bytes(), b"" | b"." | b"..") {
        return Err(Errno::INVAL);
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::ResolveFlags;
        use std::sync::atomic::{AtomicBool, Ordering};
        static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
            match rustix::fs::openat2(dir, name, DIR_FLAGS, Mode::empty(), resolve) {
                // Kernels before 5.6, or a sandbox that filters the call.
                Err(Errno::NOSYS) | Err(Errno::PERM) => NO_OPENAT2.store(true, Ordering::Relaxed),
                Err(Errno::AGAIN) => {}
                r => return r,
            }
        }
    }
    rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())
}

/// The host-path root, opened once per operation; every volume is one name directly under it.
pub(super) struct Root {
    fd: OwnedFd,
}

impl Root {
    /// Opens the root directory (the operator's own path: symlinks in it are trusted).
    pub(super) fn open(path: &Path) -> io::Result<Root> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(rustix::fs::CWD, path, flags, Mode::empty()).map_err(io_err)?;
        Ok(Root { fd })
    }

    /// Creates the directory `name`; an existing plain directory is fine, anything else (a
    /// symlink, a file) is `AlreadyExists`.
    pub(super) fn create_dir(&self, name: &OsStr) -> io::Result<()> {
        let name = c_name(name)?;
        match rustix::fs::mkdirat(&self.fd, name.as_c_str(), Mode::from_raw_mode(0o777)) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => match open_dir_at(self.fd.as_fd(), &name) {
                Ok(_) => Ok(()),
                Err(Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a plain directory (symlinks are not followed)",
                )),
                Err(e) => Err(io_err(e)),
            },
            Err(e) => Err(io_err(e)),
        }
    }

    /// Removes the directory `name` and everything in it. `Ok(false)` when it did not exist.
    pub(super) fn remove_tree(&self, name: &OsStr, hook: Option<Hook<'_>>) -> io::Result<bool> {
        let name = c_name(name)?;
        let fd = match self.open_volume(&name, hook) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            r => r?,
        };
        empty_dir(fd, hook)?;
        call(hook, &name);
        rustix::fs::unlinkat(&self.fd, name.as_c_str(), AtFlags::REMOVEDIR).map_err(io_err)?;
        Ok(true)
    }

    /// Removes everything inside the directory `name`, keeping the directory.
    pub(super) fn empty(&self, name: &OsStr, hook: Option<Hook<'_>>) -> io::Result<()> {
        let name = c_name(name)?;
        let fd = self.open_volume(&name, hook)?;
        empty_dir(fd, hook)
    }

    /// The names of the entries directly under the root that are directories (not symlinks).
    pub(super) fn directories(&self) -> io::Result<Vec<String>> {
        // A new descriptor of the root itself (trusted, as in `open`), for its own read position.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, c".", flags, Mode::empty()).map_err(io_err)?;
        let mut dir = Dir::new(fd).map_err(io_err)?;
        let mut names = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(io_err)?;
            let name = entry.file_name().to_bytes();
            if entry.file_type() == FileType::Directory && !matches!(name, b"." | b"..") {
                if let Ok(name) = std::str::from_utf8(name) {
                    names.push(name.to_string());
                }
            }
        }
        Ok(names)
    }

    /// Removes the directory `name` only if it is empty: `Ok(false)` when it holds anything
    /// (the kernel refuses, so nothing inside is ever touched) or is not there.
    pub(super) fn remove_if_empty(&self, name: &OsStr) -> io::Result<bool> {
        let name = c_name(name)?;
        match rustix::fs::unlinkat(&self.fd, name.as_c_str(), AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(Errno::NOTEMPTY | Errno::EXIST | Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err(e)),
        }
    }

    fn open_volume(&self, name: &CStr, hook: Option<Hook<'_>>) -> io::Result<OwnedFd> {
        call(hook, name);
        open_dir_at(self.fd.as_fd(), name).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR | Errno::XDEV => io::Error::new(
                io::ErrorKind::InvalidInput,
                "is not a plain directory (a symlink or a file; symlinks are not followed)",
            ),
            e => io_err(e),
        })
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(name.as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name holds a NUL byte"))
}

fn call(hook: Option<Hook<'_>>, name: &CStr) {
    if let Some(h) = hook {
        h(&name.to_string_lossy());
    }
}

/// One directory being emptied, and its name in the directory below it on the stack.
struct Frame {
    dir: Dir,
    name: Option<CString>,
    /// Whether this pass over the entries removed any (then it is read once more: entries
    /// renamed or created meanwhile may have been missed).
    removed: bool,
    passes: u8,
}

/// How often a directory is re-read while entries keep appearing in it.
const MAX_PASSES: u8 = 4;

impl Frame {
    fn new(fd: OwnedFd, name: Option<CString>) -> io::Result<Frame> {
        Ok(Frame { dir: Dir::new(fd).map_err(io_err)?, name, removed: false, passes: 1 })
    }
}

/// Empties the directory open as `top`, depth first without recursion: each subdirectory is
/// opened by name relative to its parent's descriptor, emptied, then removed relative to the
/// same descriptor. Nothing is ever resolved from a path.
fn empty_dir(top: OwnedFd, hook: Option<Hook<'_>>) -> io::Result<()> {
    let mut stack = vec![Frame::new(top, None)?];
    while let Some(frame) = stack.last_mut() {
        let entry = match frame.dir.read() {
            None if frame.removed && frame.passes < MAX_PASSES => {
                frame.dir.rewind();
                frame.removed = false;
                frame.passes += 1;
                continue;
            }
            None => {
                let done = stack.pop().expect("a frame is on the stack");
                if let (Some(name), Some(parent)) = (done.name, stack.last_mut()) {
                    drop(done.dir);
                    call(hook, &name);
                    remove_at(parent.dir.fd().map_err(io_err)?, &name, true)?;
                    parent.removed = true;
                }
                continue;
            }
            Some(entry) => entry.map_err(io_err)?,
        };
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let name = name.to_owned();
        let parent = frame.dir.fd().map_err(io_err)?;
        call(hook, &name);
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => rustix::fs::statat(parent, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
                .unwrap_or(false),
            _ => false,
        };
        frame.removed = true;
        if !is_dir {
            match rustix::fs::unlinkat(parent, name.as_c_str(), AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => continue,
                // Swapped for a directory since it was listed: descend into it below.
                Err(Errno::ISDIR) | Err(Errno::PERM) => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        match open_dir_at(parent, &name) {
            Ok(fd) => stack.push(Frame::new(fd, Some(name))?),
            Err(Errno::NOENT) => {}
            // Swapped for a symlink or a file since it was listed: remove that, not its target.
            Err(Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => remove_at(parent, &name, false)?,
            Err(e) => return Err(io_err(e)),
        }
    }
    Ok(())
}

fn remove_at(dir: BorrowedFd<'_>, name: &CStr, is_dir: bool) -> io::Result<()> {
    let flags = if is_dir { AtFlags::REMOVEDIR } else { AtFlags::empty() };
    match rustix::fs::unlinkat(dir, name, flags) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(io_err(e)),
    }
}
