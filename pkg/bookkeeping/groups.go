package bookkeeping

import "context"

// Groups lists the consumer groups a store knows, for the admin API and the
// group planner.
type Groups interface {
	// ListGroups returns up to limit group names in byte order, starting
	// strictly after after ("" starts at the beginning); more reports whether
	// names remain (continue from the last one returned).
	//
	// A group is listed once a member Joined it or a standalone Commit or a
	// Reset was made on it, and stays listed: nothing removes a group (an
	// empty, expired group is still a group whose offsets may matter).
	// Backends may also list a group whose only standalone Commit or Reset
	// failed. Errors: *ValidationError (limit in [1, MaxListLimit], after
	// "" or a valid name).
	ListGroups(ctx context.Context, after string, limit int) (groups []string, more bool, err error)
}

// ValidateListGroups checks the arguments of ListGroups.
func ValidateListGroups(after string, limit int) error {
	if after != "" {
		if err := ValidateName("after", after); err != nil {
			return err
		}
	}
	return ValidateListLimit(limit)
}
