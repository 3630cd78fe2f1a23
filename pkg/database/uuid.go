package database

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUID makes a connection encode github.com/google/uuid's UUID (the type sqlc
// generates for uuid columns) straight into its 16 bytes.
//
// pgx has no plan of its own for that type: it sees a driver.Valuer, calls Value (a
// 36-character string), finds no plan for a string as a binary uuid, builds an error
// (fmt.Sprintf and all), parses the string back through the text codec and encodes
// the result. The gateway's profile under the API row put 12 % of its CPU in encoding
// the parameters of package creations, most of it in that detour for each uuid.
func registerUUID(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
	return nil
}

// uuidCodec is pgx's UUIDCodec with a plan for uuid.UUID and *uuid.UUID values (both
// are driver.Valuers, which pgx's pointer dereferencing leaves alone).
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	switch value.(type) {
	case uuid.UUID, *uuid.UUID:
		switch format {
		case pgtype.BinaryFormatCode:
			return encodeUUIDBinary{}
		case pgtype.TextFormatCode:
			return encodeUUIDText{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	u, ok := uuidOf(value)
	if !ok {
		return nil, nil
	}
	return append(buf, u[:]...), nil
}

// uuidOf returns the uuid.UUID or *uuid.UUID value, false for a nil pointer (NULL).
func uuidOf(value any) (uuid.UUID, bool) {
	switch v := value.(type) {
	case uuid.UUID:
		return v, true
	case *uuid.UUID:
		if v == nil {
			return uuid.UUID{}, false
		}
		return *v, true
	}
	return uuid.UUID{}, false
}

type encodeUUIDText struct{}

func (encodeUUIDText) Encode(value any, buf []byte) ([]byte, error) {
	u, ok := uuidOf(value)
	if !ok {
		return nil, nil
	}
	return append(buf, u.String()...), nil
}
