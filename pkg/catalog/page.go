package catalog

import "strconv"

// Page is one page of a List call. Items come in the list's documented order.
// NextPageToken is "" when there are no more items (as of the read); otherwise
// pass it back to get the items after this page. Tokens are opaque,
// backend-specific and must come from the same List call.
//
// Paging is not a snapshot: items created or deleted between calls may or may
// not appear, but an item that exists throughout appears exactly once.
type Page[T any] struct {
	Items         []T
	NextPageToken string
}

// IndexToken is the page token of a listing by partition index (such as
// Partitions.ListPartitions) that continues at index next. Every backend
// lists partitions by index range, so they share the token format.
func IndexToken(next int) string { return strconv.Itoa(next) }

// ParseIndexToken reads an IndexToken; "" is the first page (index 0).
func ParseIndexToken(token string) (int, error) {
	if token == "" {
		return 0, nil
	}
	i, err := strconv.Atoi(token)
	if err != nil || i < 1 || i >= MaxPartitions || IndexToken(i) != token {
		return 0, Invalid("pageToken", "is not a token of this listing")
	}
	return i, nil
}
