# frozen_string_literal: true

module Senju
  # The gem's version (the senju workspace version).
  VERSION = "0.1.0"
end
