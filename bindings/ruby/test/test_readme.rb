# frozen_string_literal: true

# The repository README's Ruby examples run as printed (so the README stays true).
require_relative "test_helper"
require "stringio"

class TestReadme < Minitest::Test
  include SenjuTestHelper

  README = File.expand_path("../../../README.md", __dir__)

  def ruby_blocks
    File.read(README, encoding: "UTF-8").scan(/^```ruby\n(.*?)^```/m).map(&:first)
  end

  def test_readme_has_a_ruby_example
    refute_empty ruby_blocks, "no ```ruby block in #{README}"
  end

  def test_readme_examples_run
    ruby_blocks.each_with_index do |source, i|
      out = StringIO.new
      Dir.chdir(tmpdir) do # the examples open relative paths such as "data.sj"
        $stdout = out
        begin
          # A fresh binding per block; `require` of an already loaded file is a no-op.
          eval(source, TOPLEVEL_BINDING.dup, "#{README}: ruby block #{i}", 1)
        ensure
          $stdout = STDOUT
        end
        # The block form closes the database, so a second open of the file succeeds.
        Senju::DB.open("data.sj", &:size) if File.exist?("data.sj")
      end
      refute_empty out.string, "README ruby block #{i} printed nothing"
    end
  end
end
