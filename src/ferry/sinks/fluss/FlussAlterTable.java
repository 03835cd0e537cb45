/*
 * Adds columns to a Fluss table through the Java client's Admin.alterTable, for ferry's Fluss sink
 * (the Python client has no call for it). Run as a single-file program:
 *
 *   java -cp fluss-client.jar FlussAlterTable.java < request.properties
 *
 * The request, on standard input in java.util.Properties format (UTF-8), holds the client's
 * configuration (bootstrap.servers, client.*) and the change:
 *
 *   ferry.database, ferry.table        the table
 *   ferry.column.<i>.name              the columns to add, i = 0, 1, ..., appended in that order
 *   ferry.column.<i>.type              in Fluss SQL spelling: INT, DECIMAL(10, 2), STRING NOT NULL
 *   ferry.column.<i>.comment           optional
 *
 * Exit code 0: applied. 1: the server or the client refused it (the reason is the last line of
 * standard error). 2: the request could not be read.
 */

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.TableChange;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.types.DataType;
import org.apache.fluss.types.DataTypeParser;

import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

public final class FlussAlterTable {

    private static final String PREFIX = "ferry.";

    private FlussAlterTable() {}

    public static void main(String[] args) {
        Properties request = new Properties();
        TablePath path;
        List<TableChange> changes = new ArrayList<>();
        Map<String, String> client = new HashMap<>();
        long timeoutSeconds;
        try {
            request.load(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String key : request.stringPropertyNames()) {
                if (!key.startsWith(PREFIX)) {
                    client.put(key, request.getProperty(key));
                }
            }
            path = TablePath.of(required(request, "ferry.database"), required(request, "ferry.table"));
            timeoutSeconds = Long.parseLong(request.getProperty("ferry.timeout-seconds", "60"));
            for (int i = 0; request.getProperty("ferry.column." + i + ".name") != null; i++) {
                String name = request.getProperty("ferry.column." + i + ".name");
                String type = required(request, "ferry.column." + i + ".type");
                DataType dataType;
                try {
                    dataType = DataTypeParser.parse(type);
                } catch (RuntimeException e) {
                    throw new IllegalArgumentException("column " + name + ": cannot parse type " + type + ": " + e.getMessage(), e);
                }
                String comment = request.getProperty("ferry.column." + i + ".comment");
                changes.add(TableChange.addColumn(name, dataType, comment, TableChange.ColumnPosition.last()));
            }
            if (changes.isEmpty()) {
                throw new IllegalArgumentException("no column to add (ferry.column.0.name is missing)");
            }
        } catch (Exception e) {
            System.err.println("error: invalid request: " + e.getMessage());
            System.exit(2);
            return;
        }
        int status = 0;
        try (Connection connection = ConnectionFactory.createConnection(Configuration.fromMap(client));
                Admin admin = connection.getAdmin()) {
            admin.alterTable(path, changes, false).get(timeoutSeconds, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            System.err.println("error: " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
            status = 1;
        } catch (Exception e) {
            System.err.println("error: " + e.getClass().getSimpleName() + ": " + e.getMessage());
            status = 1;
        }
        System.exit(status);
    }

    private static String required(Properties request, String key) {
        String value = request.getProperty(key);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException(key + " is missing");
        }
        return value;
    }
}
