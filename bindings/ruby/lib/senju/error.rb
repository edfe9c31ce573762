# frozen_string_literal: true

module Senju
  # Base class of every senju error. The subclasses mirror the Rust error tree
  # (senju::OpenError and senju::StorageError); each message says what to do.
  class Error < StandardError; end

  # Another process (or handle) has the file open for writing.
  class LockedError < Error; end
  # A readonly: true open found a file that was not closed cleanly; open it once for
  # writing (that recovers it), then read-only.
  class NeedsRecoveryError < Error; end
  # The file exists but is not a senju database.
  class NotADatabaseError < Error; end
  # The file was written by a newer senju format.
  class UnsupportedVersionError < Error; end
  # A record, index entry or file structure failed its checks.
  class CorruptedError < Error; end
  # An option of DB.open was out of range (e.g. shards: 3).
  class InvalidOptionError < Error; end
  # The file does not exist and create: false was given.
  class NotFoundError < Error; end
  # The operating system refused an open, a write, a growth or a sync. #errno is its
  # error number (Errno::ENOSPC::Errno on a full disk), or nil where there is none.
  class IoError < Error
    attr_reader :errno
  end
  # A key (over 1 MiB) or value (over 1 GiB) is too long.
  class TooLargeError < Error; end
  # The handle was closed.
  class ClosedError < Error; end
  # The file reached its max_size.
  class FullError < Error; end
  # A write on a handle opened with readonly: true.
  class ReadOnlyError < Error; end
  # A call in a child process made by fork on a handle its parent opened: a handle
  # belongs to the process that opened it. Closing or collecting it in the child leaves
  # the file and the parent alone; open the database in the child once the parent has
  # closed it, or open it only after forking.
  class ForkedError < Error; end
end
