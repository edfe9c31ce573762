# frozen_string_literal: true

# Shared setup: minitest (bundled with Ruby) and the extension built by `make ruby`.
require "minitest/autorun"
require "tmpdir"
require "senju"

Warning[:experimental] = false if Warning.respond_to?(:[]=)

module SenjuTestHelper
  # A fresh temporary directory, removed after the test.
  def tmpdir
    @tmpdir ||= Dir.mktmpdir("senju-rb-")
  end

  def db_path(name = "test.sj")
    File.join(tmpdir, name)
  end

  def teardown
    FileUtils.remove_entry(@tmpdir) if @tmpdir
    super
  end
end
