package audit

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// CSVHeader is the first row of a CSV export: the canonical fields, prev_hash, hash.
var CSVHeader = []string{"seq", "created_at", "actor", "actor_user_id", "action", "package_id", "file_id", "recipient_id", "ip", "user_agent", "detail", "prev_hash", "hash"}

// AppendJSONL appends e as one line of a JSONL export: its canonical JSON with
// prev_hash and hash added, and a newline.
func AppendJSONL(b []byte, e Entry) []byte {
	c := Canonical(e)
	b = append(b, c[:len(c)-1]...)
	b = append(b, `,"prev_hash":`...)
	b = appendString(b, e.PrevHash)
	b = append(b, `,"hash":`...)
	b = appendString(b, e.Hash)
	return append(b, '}', '\n')
}

// CSVRecord is e as a row of a CSV export; an absent id is an empty cell.
func CSVRecord(e Entry) []string {
	opt := func(id *uuid.UUID) string {
		if id == nil {
			return ""
		}
		return id.String()
	}
	actor := ""
	if e.ActorUserID != nil {
		actor = strconv.FormatInt(*e.ActorUserID, 10)
	}
	return []string{strconv.FormatInt(e.Seq, 10), e.CreatedAt.UTC().Format(TimeLayout), e.Actor, actor, e.Action,
		opt(e.PackageID), opt(e.FileID), opt(e.RecipientID), e.IP, e.UserAgent, e.Detail, e.PrevHash, e.Hash}
}

type jsonLine struct {
	Seq         *int64     `json:"seq"`
	CreatedAt   string     `json:"created_at"`
	Actor       string     `json:"actor"`
	ActorUserID *int64     `json:"actor_user_id"`
	Action      string     `json:"action"`
	PackageID   *uuid.UUID `json:"package_id"`
	FileID      *uuid.UUID `json:"file_id"`
	RecipientID *uuid.UUID `json:"recipient_id"`
	IP          string     `json:"ip"`
	UserAgent   string     `json:"user_agent"`
	Detail      string     `json:"detail"`
	PrevHash    string     `json:"prev_hash"`
	Hash        string     `json:"hash"`
}

// ReadExport calls fn with each entry of an export (JSONL or CSV, told apart by its
// first byte) in the order of its lines; a line that cannot be read is an error naming
// it. fn returning an error stops the reading with it.
func ReadExport(r io.Reader, fn func(Entry) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := br.Peek(1)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	if first[0] == '{' {
		return readJSONL(br, fn)
	}
	return readCSV(br, fn)
}

func readJSONL(br *bufio.Reader, fn func(Entry) error) error {
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l jsonLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if l.Seq == nil {
			return fmt.Errorf("line %d: no seq", line)
		}
		at, err := time.Parse(TimeLayout, l.CreatedAt)
		if err != nil {
			return fmt.Errorf("line %d: created_at: %w", line, err)
		}
		e := Entry{Seq: *l.Seq, CreatedAt: at, Actor: l.Actor, ActorUserID: l.ActorUserID, Action: l.Action,
			PackageID: l.PackageID, FileID: l.FileID, RecipientID: l.RecipientID, IP: l.IP, UserAgent: l.UserAgent,
			Detail: l.Detail, PrevHash: l.PrevHash, Hash: l.Hash}
		if err := fn(e); err != nil {
			return err
		}
	}
	return sc.Err()
}

func readCSV(br *bufio.Reader, fn func(Entry) error) error {
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = len(CSVHeader)
	cr.ReuseRecord = true
	if _, err := cr.Read(); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		e, err := fromCSV(rec)
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

func fromCSV(rec []string) (Entry, error) {
	var e Entry
	var err error
	if e.Seq, err = strconv.ParseInt(rec[0], 10, 64); err != nil {
		return e, fmt.Errorf("seq: %w", err)
	}
	if e.CreatedAt, err = time.Parse(TimeLayout, rec[1]); err != nil {
		return e, fmt.Errorf("created_at: %w", err)
	}
	if rec[3] != "" {
		id, err := strconv.ParseInt(rec[3], 10, 64)
		if err != nil {
			return e, fmt.Errorf("actor_user_id: %w", err)
		}
		e.ActorUserID = &id
	}
	ids := []**uuid.UUID{&e.PackageID, &e.FileID, &e.RecipientID}
	for i, cell := range rec[5:8] {
		if cell == "" {
			continue
		}
		id, err := uuid.Parse(cell)
		if err != nil {
			return e, fmt.Errorf("%s: %w", CSVHeader[5+i], err)
		}
		*ids[i] = &id
	}
	e.Actor, e.Action, e.IP, e.UserAgent, e.Detail, e.PrevHash, e.Hash = rec[2], rec[4], rec[8], rec[9], rec[10], rec[11], rec[12]
	return e, nil
}

// VerifyExport reads an export and verifies it as one stretch of the chain, anchored at
// its first entry's prev_hash (what came before the export is not in it). It returns
// the number of entries and the first break (nil when the export is whole).
func VerifyExport(r io.Reader) (int64, *Break, error) {
	var v *Verifier
	var broken *Break
	err := ReadExport(r, func(e Entry) error {
		if v == nil {
			v = NewVerifier(e.Seq-1, e.PrevHash)
		}
		if b := v.Add(e); b != nil {
			broken = b
			return b
		}
		return nil
	})
	if broken != nil {
		return v.Count(), broken, nil
	}
	if err != nil {
		return 0, nil, err
	}
	if v == nil {
		return 0, nil, nil
	}
	return v.Count(), nil, nil
}
