package dynamodb

import "time"

// Times are stored as Unix milliseconds (the catalog's precision); 0 or an
// absent attribute is the zero time.

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
