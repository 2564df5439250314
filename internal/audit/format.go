package audit

import (
	"encoding/json"
	"fmt"
	"strings"
)

// JSONEntry is an entry as `sluice audit ls --json` writes it, one object
// a line, for SIEM tools. Fields a kind of entry does not use are left out.
type JSONEntry struct {
	Seq       uint64                `json:"seq"`
	Time      string                `json:"time"` // RFC 3339, UTC
	TimeNs    int64                 `json:"time_ns"`
	Op        string                `json:"op"`
	Ino       uint64                `json:"ino"`
	Parent    uint64                `json:"parent,omitempty"`
	Name      string                `json:"name,omitempty"`
	NewParent uint64                `json:"new_parent,omitempty"`
	NewName   string                `json:"new_name,omitempty"`
	Replaced  uint64                `json:"replaced,omitempty"`
	Uid       *uint32               `json:"uid,omitempty"` // absent: the request carried no credentials
	Gid       *uint32               `json:"gid,omitempty"`
	Changes   map[string]JSONChange `json:"changes,omitempty"`
}

// JSONChange is one attribute's old and new value.
type JSONChange struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// JSON returns the entry of sequence seq as one line of JSON, without the
// newline.
func (e *Entry) JSON(seq uint64) ([]byte, error) {
	j := JSONEntry{
		Seq: seq, Time: TimeOf(e.Time), TimeNs: e.Time, Op: e.Op.String(), Ino: e.Ino,
		Parent: e.Parent, Name: e.Name, NewParent: e.NewParent, NewName: e.NewName, Replaced: e.Replaced,
	}
	if e.Who.Known {
		uid, gid := e.Who.Uid, e.Who.Gid
		j.Uid, j.Gid = &uid, &gid
	}
	if len(e.Changes) != 0 {
		j.Changes = make(map[string]JSONChange, len(e.Changes))
		for _, c := range e.Changes {
			j.Changes[c.Field] = JSONChange{Old: c.Old, New: c.New}
		}
	}
	return json.Marshal(&j)
}

// Text returns the entry of sequence seq as one line for people.
func (e *Entry) Text(seq uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %-9s ino=%d", seq, TimeOf(e.Time), e.Op, e.Ino)
	if e.Name != "" {
		fmt.Fprintf(&b, " entry=%d/%q", e.Parent, e.Name)
	}
	if e.NewName != "" {
		fmt.Fprintf(&b, " to=%d/%q", e.NewParent, e.NewName)
	}
	if e.Replaced != 0 {
		fmt.Fprintf(&b, " replaced=%d", e.Replaced)
	}
	if e.Who.Known {
		fmt.Fprintf(&b, " by=%d:%d", e.Who.Uid, e.Who.Gid)
	} else {
		b.WriteString(" by=unknown")
	}
	for _, c := range e.Changes {
		fmt.Fprintf(&b, " %s=%q->%q", c.Field, c.Old, c.New)
	}
	return b.String()
}
