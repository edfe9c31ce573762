# frozen_string_literal: true

# senju: an embedded key-value database for multi-threaded programs.
#
#   require "senju"
#   Senju::DB.open("data.sj") do |db|
#     db["apple"] = "red"
#     db["apple"]          # => "red" (a binary String)
#   end
#
# Keys and values are byte strings: any String goes in (its bytes are stored as they
# are), binary (ASCII-8BIT) Strings come out. See the README's Ruby section for the
# GVL modes.

require_relative "senju/version"
require_relative "senju/error"
require "senju/senju" # the native extension: lib/senju/senju.so

module Senju
  # A handle on an open database: a Hash-like store of String keys and values, safe to
  # use from many threads at once (and from other Ractors once frozen with
  # Ractor.make_shareable). Freezing the handle does not make the store read-only.
  class DB
    include Enumerable

    # The gvl: modes, numbered as the extension numbers them.
    GVL_MODES = { release: 0, hold: 1, auto: 2 }.freeze
    # Pairs fetched per native call while iterating.
    EACH_CHUNK = 1000
    private_constant :EACH_CHUNK

    private_class_method :new

    class << self
      # Opens (creating if needed) the database file at +path+, or an in-memory one with
      # <tt>memory: true</tt>. With a block, yields the handle and closes it when the
      # block ends (also on an exception), returning the block's value.
      #
      # Options: +gvl+ (:auto, :release or :hold), +memory+, +readonly+ (shared lock,
      # writes raise ReadOnlyError), +truncate+ (start empty), +create+ (default true),
      # +shards+ (a power of two, fixed when the file is created), +max_size+ (bytes),
      # +capacity_hint+ (records expected), +auto_rebuild+ (rebuild shards in a background
      # thread once their dead records outweigh their live ones and reach this many bytes
      # in all; nil: the default, 64 MiB; 0: never, leaving it to #rebuild),
      # +recovery_progress+ (called as <tt>recovery_progress.call(done, total)</tt> while the
      # open recovers a file that was not closed cleanly: bytes of records replayed so far, of
      # +total+; at most about a thousand calls, never for a clean open; an open given one
      # keeps the GVL whatever +gvl+ says, so it is called on this thread; if it raises,
      # throws or the thread is killed, it is not called again, and the open finishes,
      # closes the database and then raises, throws or dies).
      def open(path = nil, gvl: :auto, memory: false, readonly: false, truncate: false,
               create: true, shards: nil, max_size: nil, capacity_hint: nil, auto_rebuild: nil,
               recovery_progress: nil)
        unless recovery_progress.nil? || recovery_progress.respond_to?(:call)
          raise TypeError, "recovery_progress: must respond to call(done, total)"
        end
        db = _open(*open_args(path, gvl, memory, readonly, truncate, create, shards,
                              max_size, capacity_hint), int_option(:auto_rebuild, auto_rebuild),
                   recovery_progress)
        return db unless block_given?

        begin
          yield db
        ensure
          db.close
        end
      end

      private

      def open_args(path, gvl, memory, readonly, truncate, create, shards, max_size, capacity_hint)
        # File.path: what File.open takes (a String, a Pathname, anything with to_path or
        # to_str), and ArgumentError for a NUL byte, which no file name holds.
        begin
          path = File.path(path) unless path.nil?
        rescue TypeError
          raise TypeError, "path must be a String or Pathname, not #{path.class}"
        end
        raise ArgumentError, "give a path, or memory: true" if path.nil? && !memory
        raise ArgumentError, "memory: true takes no path" if path && memory
        raise ArgumentError, "an in-memory database cannot be readonly" if memory && readonly
        mode = GVL_MODES.fetch(gvl) do
          raise ArgumentError, "gvl: must be one of #{GVL_MODES.keys.inspect}, not #{gvl.inspect}"
        end
        [path, mode, memory ? true : false, readonly ? true : false, truncate ? true : false,
         create ? true : false, int_option(:shards, shards), int_option(:max_size, max_size),
         int_option(:capacity_hint, capacity_hint)]
      end

      def int_option(name, value)
        return nil if value.nil?
        raise TypeError, "#{name}: must be an Integer, not #{value.class}" unless value.is_a?(Integer)
        raise ArgumentError, "#{name}: must not be negative" if value.negative?

        value
      end
    end

    alias _delete delete
    private :_delete

    # Like Hash#delete: removes +key+ and returns its value; for a missing key returns the
    # block's value (given the key), or nil without a block.
    def delete(key)
      value = _delete(key)
      return yield(key) if value.nil? && block_given?

      value
    end

    # Like Hash#update (and #merge!): sets every pair of each hash (set_many), returns self.
    # With a block, a key that is present is set to <tt>block.call(key, old, new)</tt>
    # instead, a String; each such key is set with compare_and_set, and the block is called
    # again (with the newer old value) if another thread changed the key meanwhile.
    def update(*hashes)
      hashes.each do |hash|
        next set_many(hash) unless block_given?

        hash.to_hash.each_pair do |key, given|
          loop do
            old = self[key]
            value = old.nil? ? given : yield(key, old, given)
            if value.nil?
              raise TypeError, "the block of update must return a String, not nil"
            end
            break if compare_and_set(key, old, value)
          end
        end
      end
      self
    end
    alias merge! update

    alias _clear clear
    private :_clear

    # Like Hash#clear: removes every record, returns self.
    def clear
      _clear
      self
    end

    # Like Hash#values_at: the values of +keys+, nil for each missing one (get_many).
    def values_at(*keys)
      get_many(keys)
    end

    # Yields every key (a scan, as #each). Without a block, returns an Enumerator.
    def each_key
      return enum_for(:each_key) { size } unless block_given?

      each { |k, _| yield k }
    end

    # Yields every value (a scan, as #each). Without a block, returns an Enumerator.
    def each_value
      return enum_for(:each_value) { size } unless block_given?

      each { |_, v| yield v }
    end

    alias store []=
    alias include? key?
    alias has_key? key?
    alias member? key?
    alias length size

    # The GVL mode given to open (:auto, :release or :hold).
    def gvl
      GVL_MODES.key(_gvl)
    end

    # Like Hash#fetch: the value, else the block's value, else +default+, else KeyError.
    def fetch(key, *default)
      if default.size > 1
        raise ArgumentError, "wrong number of arguments (given #{default.size + 1}, expected 1..2)"
      end

      value = self[key]
      return value unless value.nil?
      return yield(key) if block_given?
      return default[0] unless default.empty?

      raise KeyError.new("key not found: #{key.inspect}", receiver: self, key: key)
    end

    # Yields every (key, value) pair, a chunk of pairs per native call. Weakly consistent:
    # a pair present for the whole scan is yielded once; pairs set or deleted meanwhile may
    # or may not be. Without a block, returns an Enumerator.
    def each
      return enum_for(:each) { size } unless block_given?

      cursor = _cursor
      loop do
        chunk = cursor.next_pairs(EACH_CHUNK)
        break if chunk.empty?

        i = 0
        n = chunk.size
        while i < n
          yield chunk[i], chunk[i + 1]
          i += 2
        end
      end
      self
    end
    alias each_pair each

    # Every value (a scan).
    def values
      map { |_, v| v }
    end

    # Whether there are no records.
    def empty?
      size.zero?
    end

    # Makes earlier writes durable: <tt>hard: true</tt> survives a power loss (fsync),
    # the default survives a crash of the process and starts write-back.
    def sync(hard: false)
      _sync(hard ? true : false)
      nil
    end

    def inspect
      where = path ? path.inspect : "memory"
      "#<#{self.class} #{where} gvl=#{gvl}#{closed? ? " closed" : ""}>"
    end
    alias to_s inspect
  end
end
