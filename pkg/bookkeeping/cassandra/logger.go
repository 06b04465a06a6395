package cassandra

import (
	"context"
	"log/slog"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// slogLogger sends the driver's structured log lines to an injected
// *slog.Logger (never a global one).
type slogLogger struct{ l *slog.Logger }

var _ gocql.StructuredLogger = slogLogger{}

func (s slogLogger) log(level slog.Level, msg string, fields []gocql.LogField) {
	if !s.l.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		attrs = append(attrs, slog.Any(f.Name, f.Value.Any()))
	}
	s.l.LogAttrs(context.Background(), level, msg, attrs...)
}

func (s slogLogger) Error(msg string, fields ...gocql.LogField)   { s.log(slog.LevelError, msg, fields) }
func (s slogLogger) Warning(msg string, fields ...gocql.LogField) { s.log(slog.LevelWarn, msg, fields) }
func (s slogLogger) Info(msg string, fields ...gocql.LogField)    { s.log(slog.LevelInfo, msg, fields) }
func (s slogLogger) Debug(msg string, fields ...gocql.LogField)   { s.log(slog.LevelDebug, msg, fields) }
