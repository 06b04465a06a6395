package dynamodb

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Item keys; see the package doc for the layout. Numbers in sort keys are
// zero-padded so string order is numeric order.
const (
	pkTopics        = "topics"
	pkDeletedTopics = "deleted-topics"
	pkOwners        = "owners"
	pkBookies       = "bookies"
	pkCounters      = "counters"
	pkTriggers      = "triggers"
	skLedgerCounter = "ledger-id"
	skLedger        = "ledger"
)

func partitionPK(id catalog.TopicID) string { return "partitions#" + string(id) }
func indexSK(i int) string                  { return fmt.Sprintf("%05d", i) }
func ledgerPK(id catalog.LedgerID) string   { return fmt.Sprintf("ledger#%020d", id) }
func idSK(id catalog.LedgerID) string       { return fmt.Sprintf("%020d", id) }

func byPartitionPK(id catalog.TopicID, partition int) string {
	return fmt.Sprintf("ledgers-by-partition#%s#%05d", id, partition)
}

func byStatePK(s catalog.LedgerState) string { return "ledgers-by-state#" + s.String() }

func key(pk, sk string) map[string]av { return map[string]av{attrPK: s(pk), attrSK: s(sk)} }

// Attribute names shared by every item.
const (
	attrFormat  = "fv" // item format version: formatVersion
	attrVersion = "v"  // the record's CAS version
	attrExpires = "exp"
)

// formatVersion is the item format written; readers refuse any other.
const formatVersion = 1

// item starts an item with its key and format version.
func item(pk, sk string) map[string]av {
	it := key(pk, sk)
	it[attrFormat] = n(formatVersion)
	return it
}

// read starts decoding an item, checking its format version.
func read(it map[string]av) *reader {
	r := &reader{item: it}
	if v := r.num(attrFormat); r.bad == nil && v != formatVersion {
		r.fail(attrFormat, "unknown item format %d", v)
	}
	return r
}

func topicItem(pk, sk string, t catalog.Topic) map[string]av {
	it := item(pk, sk)
	it["name"] = s(t.Name)
	it["id"] = s(string(t.ID))
	it["parts"] = n(int64(t.Partitions))
	it["cfg"] = strMap(t.Config.Map())
	it["created"] = n(ms(t.CreatedAt))
	if !t.DeletedAt.IsZero() {
		it["deleted"] = n(ms(t.DeletedAt))
	}
	it[attrVersion] = n(t.Version)
	return it
}

func decodeTopic(it map[string]av) (catalog.Topic, error) {
	r := read(it)
	t := catalog.Topic{Name: r.str("name"), ID: catalog.TopicID(r.str("id")), Partitions: int(r.num("parts")),
		CreatedAt: fromMs(r.num("created")), DeletedAt: fromMs(r.optNum("deleted")), Version: r.num(attrVersion)}
	cfg := r.strMap("cfg")
	if err := r.err(); err != nil {
		return catalog.Topic{}, err
	}
	var err error
	if t.Config, err = catalog.ParseTopicConfig(cfg); err == nil {
		err = catalog.ValidateNewTopic(t.Name, t.Partitions, t.Config)
	}
	if err == nil && (t.ID == "" || t.Version < 1) {
		err = fmt.Errorf("id %q, version %d", t.ID, t.Version)
	}
	if err != nil {
		return catalog.Topic{}, fmt.Errorf("%w: topic item %q: %v", ErrCorrupt, t.Name, err)
	}
	return t, nil
}

func partitionItem(p catalog.Partition) map[string]av {
	it := item(partitionPK(p.TopicID), indexSK(p.Index))
	it["topic"] = s(p.Topic)
	it["tid"] = s(string(p.TopicID))
	it["idx"] = n(int64(p.Index))
	if p.Owner != "" {
		it["owner"] = s(p.Owner)
	}
	it["epoch"] = n(p.Epoch)
	refs := make([]av, len(p.Ledgers))
	for i, l := range p.Ledgers {
		refs[i] = &types.AttributeValueMemberM{Value: map[string]av{"id": n(int64(l.ID)), "first": n(l.FirstOffset)}}
	}
	it["ledgers"] = &types.AttributeValueMemberL{Value: refs}
	it["lso"] = n(p.LogStartOffset)
	it[attrVersion] = n(p.Version)
	return it
}

func decodePartition(it map[string]av) (catalog.Partition, error) {
	r := read(it)
	p := catalog.Partition{Topic: r.str("topic"), TopicID: catalog.TopicID(r.str("tid")), Index: int(r.num("idx")),
		Owner: r.optStr("owner"), Epoch: r.num("epoch"), LogStartOffset: r.num("lso"), Version: r.num(attrVersion)}
	for _, e := range r.list("ledgers", catalog.MaxLedgersPerPartition) {
		sub := r.sub("ledgers", e)
		p.Ledgers = append(p.Ledgers, catalog.LedgerRef{ID: catalog.LedgerID(sub.num("id")), FirstOffset: sub.num("first")})
		r.adopt("ledgers", sub)
	}
	if err := r.err(); err != nil {
		return catalog.Partition{}, err
	}
	if p.Version < 1 || p.Epoch < 0 {
		return catalog.Partition{}, fmt.Errorf("%w: partition %s/%d: version %d, epoch %d", ErrCorrupt, p.TopicID, p.Index, p.Version, p.Epoch)
	}
	return p, nil
}

func ownerItem(o catalog.Owner) map[string]av {
	it := item(pkOwners, o.ID)
	it["addr"] = s(o.Address)
	it[attrExpires] = n(ms(o.ExpiresAt))
	return it
}

func decodeOwner(it map[string]av) (catalog.Owner, error) {
	r := read(it)
	o := catalog.Owner{ID: r.str(attrSK), Address: r.str("addr"), ExpiresAt: fromMs(r.num(attrExpires))}
	return o, r.err()
}

func bookieItem(bk catalog.Bookie) map[string]av {
	it := item(pkBookies, bk.ID)
	it["addr"] = s(bk.Address)
	it["free"] = n(bk.FreeBytes)
	it["total"] = n(bk.TotalBytes)
	it["ro"] = b(bk.ReadOnly)
	if bk.Draining {
		it["drain"] = b(true)
	}
	it[attrExpires] = n(ms(bk.ExpiresAt))
	return it
}

func decodeBookie(it map[string]av) (catalog.Bookie, error) {
	r := read(it)
	bk := catalog.Bookie{ID: r.str(attrSK), Address: r.str("addr"), FreeBytes: r.num("free"), TotalBytes: r.num("total"),
		ReadOnly: r.boolean("ro"), Draining: r.optBool("drain"), ExpiresAt: fromMs(r.num(attrExpires))}
	return bk, r.err()
}

func ledgerItem(m catalog.LedgerMetadata) map[string]av {
	it := item(ledgerPK(m.ID), skLedger)
	it["id"] = n(int64(m.ID))
	it["topic"] = s(m.Topic)
	it["tid"] = s(string(m.TopicID))
	it["part"] = n(int64(m.Partition))
	it["e"] = n(int64(m.Replication.Ensemble))
	it["qw"] = n(int64(m.Replication.WriteQuorum))
	it["qa"] = n(int64(m.Replication.AckQuorum))
	segs := make([]av, len(m.Ensembles))
	for i, seg := range m.Ensembles {
		segs[i] = &types.AttributeValueMemberM{Value: map[string]av{"first": n(seg.FirstEntry), "bookies": strList(seg.Bookies)}}
	}
	it["ens"] = &types.AttributeValueMemberL{Value: segs}
	it["state"] = s(m.State.String())
	it["last"] = n(m.LastEntry)
	it["firstOff"] = n(m.FirstOffset)
	it["lastOff"] = n(m.LastOffset)
	if m.Location != "" {
		it["loc"] = s(m.Location)
	}
	it["wo"] = s(m.WriterOwner)
	it["we"] = n(m.WriterEpoch)
	it["created"] = n(ms(m.CreatedAt))
	if !m.ClosedAt.IsZero() {
		it["closed"] = n(ms(m.ClosedAt))
	}
	if len(m.Damaged) > 0 {
		ds := make([]av, len(m.Damaged))
		for i, d := range m.Damaged {
			ds[i] = &types.AttributeValueMemberM{Value: map[string]av{"bookie": s(d.Bookie), "entry": n(d.Entry), "why": s(string(d.Reason)), "at": n(ms(d.At))}}
		}
		it["dmg"] = &types.AttributeValueMemberL{Value: ds}
	}
	it[attrVersion] = n(m.Version)
	return it
}

func decodeLedger(it map[string]av) (catalog.LedgerMetadata, error) {
	r := read(it)
	m := catalog.LedgerMetadata{ID: catalog.LedgerID(r.num("id")), Topic: r.str("topic"), TopicID: catalog.TopicID(r.str("tid")),
		Partition:   int(r.num("part")),
		Replication: catalog.Replication{Ensemble: int(r.num("e")), WriteQuorum: int(r.num("qw")), AckQuorum: int(r.num("qa"))},
		LastEntry:   r.num("last"), FirstOffset: r.num("firstOff"), LastOffset: r.num("lastOff"), Location: r.optStr("loc"),
		WriterOwner: r.str("wo"), WriterEpoch: r.num("we"), CreatedAt: fromMs(r.num("created")), ClosedAt: fromMs(r.optNum("closed")),
		Version: r.num(attrVersion)}
	for _, e := range r.list("ens", catalog.MaxEnsembleSegments) {
		sub := r.sub("ens", e)
		seg := catalog.EnsembleSegment{FirstEntry: sub.num("first")}
		for _, bk := range sub.list("bookies", catalog.MaxEnsembleSize) {
			if v, ok := bk.(*types.AttributeValueMemberS); ok {
				seg.Bookies = append(seg.Bookies, v.Value)
			} else {
				sub.fail("bookies", "want strings, have %T", bk)
			}
		}
		m.Ensembles = append(m.Ensembles, seg)
		r.adopt("ens", sub)
	}
	if _, ok := it["dmg"]; ok {
		for _, e := range r.list("dmg", catalog.MaxEnsembleSize*catalog.MaxEnsembleSegments) {
			sub := r.sub("dmg", e)
			m.Damaged = append(m.Damaged, catalog.DamagedCopy{Bookie: sub.str("bookie"), Entry: sub.num("entry"),
				Reason: catalog.DamageReason(sub.str("why")), At: fromMs(sub.num("at"))})
			r.adopt("dmg", sub)
		}
	}
	state := r.str("state")
	if err := r.err(); err != nil {
		return catalog.LedgerMetadata{}, err
	}
	var err error
	if m.State, err = catalog.ParseLedgerState(state); err == nil && (m.ID < 1 || m.Version < 1 || len(m.Ensembles) == 0) {
		err = fmt.Errorf("id %d, version %d, %d ensemble segments", m.ID, m.Version, len(m.Ensembles))
	}
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("%w: ledger item %s: %v", ErrCorrupt, ledgerPK(m.ID), err)
	}
	return m, nil
}

func triggerItem(t catalog.Trigger) map[string]av {
	it := item(pkTriggers, t.Name)
	it["topic"] = s(t.Topic)
	it["tid"] = s(string(t.TopicID))
	it["fn"] = s(t.Function)
	it["on"] = b(t.Enabled)
	it["start"] = s(string(t.StartingPosition))
	if t.StartingTimestampMs != 0 {
		it["startTs"] = n(t.StartingTimestampMs)
	}
	it["batch"] = n(int64(t.BatchSize))
	it["batchBytes"] = n(int64(t.MaxBatchBytes))
	it["window"] = n(t.BatchWindowMs)
	it["par"] = n(int64(t.Parallelization))
	it["retries"] = n(int64(t.MaxRetries))
	it["backoff0"] = n(t.RetryBackoffInitialMs)
	it["backoffMax"] = n(t.RetryBackoffMaxMs)
	it["maxAge"] = n(t.MaxRecordAgeMs)
	it["bisect"] = b(t.BisectOnError)
	if t.ReadUncommitted {
		it["uncommitted"] = b(true)
	}
	if t.OnFailureTopic != "" {
		it["dlq"] = s(t.OnFailureTopic)
	}
	if t.RunAs != "" {
		it["runAs"] = s(t.RunAs)
	}
	it["created"] = n(ms(t.CreatedAt))
	it["updated"] = n(ms(t.UpdatedAt))
	it[attrVersion] = n(t.Version)
	return it
}

// decodeTrigger reads a trigger item and re-validates it: triggers are
// stored with their defaults resolved, so a zero where a default exists is
// corrupt too.
func decodeTrigger(it map[string]av) (catalog.Trigger, error) {
	r := read(it)
	t := catalog.Trigger{Name: r.str(attrSK), TopicID: catalog.TopicID(r.str("tid")), TriggerSpec: catalog.TriggerSpec{
		Topic: r.str("topic"), Function: r.str("fn"), Enabled: r.boolean("on"),
		StartingPosition: catalog.StartingPosition(r.str("start")), StartingTimestampMs: r.optNum("startTs"),
		BatchSize: int(r.num("batch")), MaxBatchBytes: int(r.num("batchBytes")), BatchWindowMs: r.num("window"),
		Parallelization: int(r.num("par")), MaxRetries: int(r.num("retries")),
		RetryBackoffInitialMs: r.num("backoff0"), RetryBackoffMaxMs: r.num("backoffMax"), MaxRecordAgeMs: r.num("maxAge"),
		BisectOnError: r.boolean("bisect"), OnFailureTopic: r.optStr("dlq"), ReadUncommitted: r.optBool("uncommitted"), RunAs: r.optStr("runAs"),
	}, CreatedAt: fromMs(r.num("created")), UpdatedAt: fromMs(r.num("updated")), Version: r.num(attrVersion)}
	if err := r.err(); err != nil {
		return catalog.Trigger{}, err
	}
	err := catalog.ValidateTrigger(t.Name, t.TriggerSpec)
	if err == nil && (t.TriggerSpec != t.WithDefaults() || t.TopicID == "" || t.Version < 1) {
		err = fmt.Errorf("unresolved defaults, topic id %q, version %d", t.TopicID, t.Version)
	}
	if err != nil {
		return catalog.Trigger{}, fmt.Errorf("%w: trigger item %q: %v", ErrCorrupt, t.Name, err)
	}
	return t, nil
}
