//go:build sabotage_commitepoch

package cassandra

// sabotageCommitEpoch (build tag sabotage_commitepoch, chaos tests only): a member's commit is applied without checking that it still holds the lease at that epoch (see offsets.go Commit).
// Never ship this build: it exists so that chaos/harness can show that its
// scenario fails without the mechanism.
const sabotageCommitEpoch = true

// unfencedCommit is fencedCommit without its lease condition.
const unfencedCommit = `UPDATE consumer_partitions SET committed_offset = ?, metadata = ?, commit_epoch = ?, committed_topic_id = ? ` +
	`WHERE group_id = ? AND topic = ? AND partition_id = ? IF committed_topic_id IN (?, null) AND committed_offset <= ?`
