package chunk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// recoverAll rolls back the overwrites that a crash interrupted, using the
// undo files left in <dir>/undo, and removes the undo files. Per block of a
// record: if the block's current entry is not the record's new entry, a
// later write superseded the record and it is ignored; if the block's data
// matches its current entry (new or old), it is consistent; otherwise the
// saved bytes and the old entry are put back.
func (s *Store) recoverAll() error {
	dir := filepath.Join(s.dir, "undo")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("chunk: recover target %d: %w", s.opts.Target, ioErr(err))
	}
	removed := false
	for _, de := range ents {
		path := filepath.Join(dir, de.Name())
		id, ok := parseName(de.Name())
		if !ok {
			s.log.Warn("chunk: ignoring unknown file", "file", path)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("chunk: recover chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
		}
		if len(b) >= len(undoMagic) && [4]byte(b[:4]) != [4]byte{} { // a zero magic is a cleared record
			if err := s.recoverChunk(id, b); err != nil {
				return err
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("chunk: recover chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

func (s *Store) recoverChunk(id ID, b []byte) error {
	rec, err := parseUndo(b)
	if err != nil || rec.id != id {
		// A record that did not get written whole belongs to a write that
		// never touched entries or data.
		s.log.Warn("chunk: ignoring a partial undo record", "ino", id.Ino, "slot", id.Slot, "err", err)
		return nil
	}
	h, err := s.lockChunk(id, false, true)
	if err == errNoChunk {
		return nil
	}
	if err != nil {
		return fmt.Errorf("chunk: recover chunk %v on target %d: %w", id, s.opts.Target, err)
	}
	defer s.unlock(h, true)
	var raw [entrySize]byte
	var buf [BlockSize]byte
	rolled := 0
	for _, ub := range rec.blocks {
		bs := int64(ub.blk) * BlockSize
		if err := readFull(h.sum, raw[:], int64(ub.blk)*entrySize); err != nil {
			return fmt.Errorf("chunk: recover chunk %v on target %d at offset %d: %w", id, s.opts.Target, bs, ioErr(err))
		}
		// The entry is the new one (the write got past its entries), or
		// still the old one (after a power loss the data may have reached
		// the disk without the entries); anything else is a later state.
		var cur [entrySize]byte
		switch raw {
		case ub.newEntry:
			cur = ub.newEntry
		case ub.oldEntry:
			cur = ub.oldEntry
		default:
			continue
		}
		e, _ := parseEntry(cur[:], ub.blk) // checked by parseUndo
		if !e.hasData() && raw == ub.oldEntry {
			continue // nothing in .dat was valid before
		}
		if e.hasData() {
			if err := readFull(h.data, buf[:e.cur.n], bs); err != nil {
				return fmt.Errorf("chunk: recover chunk %v on target %d at offset %d: %w", id, s.opts.Target, bs, ioErr(err))
			}
			if crc(buf[:e.cur.n]) == e.cur.crc {
				continue
			}
		}
		if len(ub.old) > 0 {
			if _, err := h.data.WriteAt(ub.old, bs+int64(ub.off)); err != nil {
				return fmt.Errorf("chunk: recover chunk %v on target %d at offset %d: %w", id, s.opts.Target, bs, ioErr(err))
			}
		}
		if _, err := h.sum.WriteAt(ub.oldEntry[:], int64(ub.blk)*entrySize); err != nil {
			return fmt.Errorf("chunk: recover chunk %v on target %d at offset %d: %w", id, s.opts.Target, bs, ioErr(err))
		}
		rolled++
	}
	if rolled == 0 {
		return nil
	}
	s.log.Warn("chunk: rolled back an interrupted overwrite", "ino", id.Ino, "slot", id.Slot, "blocks", rolled)
	h.unsynced = true
	if err := s.syncLocked(h); err != nil {
		return err
	}
	n, err := s.chunkLength(id, h.sum)
	if err != nil {
		return err
	}
	h.length = n
	return nil
}
