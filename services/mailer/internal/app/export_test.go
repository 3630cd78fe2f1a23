package app

import "google.golang.org/protobuf/proto"

func protoMarshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }
