module github.com/shipfile/shipfile/proto

go 1.26.8
