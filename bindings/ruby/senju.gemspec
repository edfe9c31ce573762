# frozen_string_literal: true

require_relative "lib/senju/version"

Gem::Specification.new do |spec|
  spec.name = "senju"
  spec.version = Senju::VERSION
  spec.summary = "An embedded key-value database for multi-threaded Ruby programs"
  spec.description = "senju is a crash-safe hash table in one memory-mapped file, written " \
                     "in Rust. Senju::DB is a Hash-like handle that releases the GVL around " \
                     "long store calls (gvl: :auto | :release | :hold) and works from Ractors."
  spec.authors = ["The senju developers"]
  spec.license = "MIT OR Apache-2.0"
  spec.homepage = "https://github.com/senju-db/senju"
  spec.required_ruby_version = ">= 3.1"
  spec.files = Dir["lib/**/*.rb", "ext/senju/extconf.rb", "ext/senju/Cargo.toml",
                   "ext/senju/src/**/*.rs", "test/**/*.rb", "bench/**/*"]
  spec.require_paths = ["lib"]
  # extconf.rb uses the rb_sys gem when it is installed and plain cargo otherwise, so
  # the gem declares no runtime dependency.
  spec.extensions = ["ext/senju/extconf.rb"]
  spec.metadata["rubygems_mfa_required"] = "true"
end
