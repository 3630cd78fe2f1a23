package store_test

import "github.com/shipfile/shipfile/services/gateway/internal/store/storetest"

// The set-up every test of this package shares (storetest).
var (
	newPool      = storetest.NewPool
	newSmallPool = storetest.NewSmallPool
	insertUser   = storetest.InsertUser
	draftPackage = storetest.DraftPackage
)
