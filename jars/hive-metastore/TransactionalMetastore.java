import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.txn.TxnDbUtil;

/**
 * Starts Hive's standalone metastore on a database that also has the transaction tables (TXNS,
 * HIVE_LOCKS, NEXT_LOCK_ID, ...) every lock needs. DataNucleus' schema auto-creation makes only the
 * catalog's tables, and the schema scripts that make the others ship in Hive's binary distribution
 * alone, not in its Maven jars; TxnDbUtil.prepDb, in the metastore's jar, creates them (and leaves
 * those that exist). Run as a source file: java -cp <conf>:<lib>/* TransactionalMetastore.java -p PORT
 */
public final class TransactionalMetastore {
    public static void main(String[] args) throws Throwable {
        Configuration conf = MetastoreConf.newMetastoreConf();
        TxnDbUtil.prepDb(conf);
        HiveMetaStore.main(args);
    }
}
