/*
 * Records how upstream WebShop's search ranks documents: pyserini 0.17's LuceneSearcher over the index that WebShop's
 * search_engine/run_indexing.sh builds, in Lucene alone (no pyserini, no Anserini jar).
 *
 *   java -cp "$(ls /usr/share/java/lucene-{core,analyzers-common}-8*.jar | paste -sd:)" WebShopLucene.java \
 *       DOCUMENTS.jsonl QUERIES.txt K > hits.jsonl
 *
 * DOCUMENTS.jsonl: WebShop's index documents ({"id", "contents"}, string fields). QUERIES.txt: one query per line.
 * Out: one JSON line per query: {"query", "terms" (the analyser's terms), "hits": [[id, score], ...] (the k best)}.
 * As Anserini 0.14 (pyserini 0.17's) does it: IndexCollection with JsonCollection and DefaultLuceneDocumentGenerator
 * (id: StringField, stored, and a SortedDocValuesField to break ties; contents: indexed with freqs and positions;
 * documents with blank contents skipped), DefaultEnglishAnalyzer.newDefaultInstance() for both documents and queries,
 * BM25Similarity() at index time; SimpleSearcher.search(q, k): BagOfWordsQueryGenerator (a SHOULD TermQuery per
 * distinct term, boosted by its count), BM25Similarity(0.9, 0.4), sorted by score then the id field (Anserini's
 * BREAK_SCORE_TIES_BY_DOCID). The scores are Lucene's, before Anserini's ScoreTiesAdjusterReranker rounds them to 1e-4
 * (which changes no order).
 */

import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.lucene.LucenePackage;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.LowerCaseFilter;
import org.apache.lucene.analysis.StopFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.en.EnglishPossessiveFilter;
import org.apache.lucene.analysis.en.PorterStemFilter;
import org.apache.lucene.analysis.standard.StandardTokenizer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.FieldType;
import org.apache.lucene.document.SortedDocValuesField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexOptions;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.BoostQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.SortField;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.util.BytesRef;

public class WebShopLucene {
  static final Sort BREAK_SCORE_TIES_BY_DOCID =
      new Sort(SortField.FIELD_SCORE, new SortField("id", SortField.Type.STRING_VAL));

  /** Anserini's DefaultEnglishAnalyzer.newDefaultInstance(): Porter stemming, Lucene's English stop words. */
  static final class DefaultEnglishAnalyzer extends Analyzer {
    @Override
    protected TokenStreamComponents createComponents(String fieldName) {
      Tokenizer source = new StandardTokenizer();
      TokenStream result = new EnglishPossessiveFilter(source);
      result = new LowerCaseFilter(result);
      result = new StopFilter(result, EnglishAnalyzer.ENGLISH_STOP_WORDS_SET);
      result = new PorterStemFilter(result);
      return new TokenStreamComponents(source, result);
    }

    @Override
    protected TokenStream normalize(String fieldName, TokenStream in) {
      return new LowerCaseFilter(in);
    }
  }

  /** Anserini's AnalyzerUtils.analyze: the non-empty terms, in order. */
  static List<String> analyze(Analyzer analyzer, String text) throws IOException {
    List<String> terms = new ArrayList<>();
    try (TokenStream stream = analyzer.tokenStream(null, text)) {
      CharTermAttribute term = stream.addAttribute(CharTermAttribute.class);
      stream.reset();
      while (stream.incrementToken()) {
        if (term.length() > 0) terms.add(term.toString());
      }
      stream.end();
    }
    return terms;
  }

  public static void main(String[] args) throws IOException {
    if (args.length != 3) {
      System.err.println("usage: WebShopLucene DOCUMENTS.jsonl QUERIES.txt K");
      System.exit(2);
    }
    int k = Integer.parseInt(args[2]);
    Analyzer analyzer = new DefaultEnglishAnalyzer();
    ByteBuffersDirectory directory = new ByteBuffersDirectory();
    IndexWriterConfig config = new IndexWriterConfig(analyzer);
    config.setSimilarity(new BM25Similarity());
    config.setUseCompoundFile(false);
    FieldType contentsType = new FieldType();
    contentsType.setStoreTermVectors(true);  // run_indexing.sh's --storeDocvectors
    contentsType.setStoreTermVectorPositions(true);
    contentsType.setIndexOptions(IndexOptions.DOCS_AND_FREQS_AND_POSITIONS);  // --storePositions
    try (IndexWriter writer = new IndexWriter(directory, config);
         BufferedReader lines = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8)) {
      String line;
      while ((line = lines.readLine()) != null) {
        if (line.isBlank()) continue;
        Map<String, String> doc = parseFlatObject(line);
        String id = doc.get("id"), contents = doc.get("contents");
        if (contents.trim().length() == 0) continue;  // Anserini's EmptyDocumentException
        Document document = new Document();
        document.add(new StringField("id", id, Field.Store.YES));
        document.add(new SortedDocValuesField("id", new BytesRef(id)));
        document.add(new Field("contents", contents, contentsType));
        writer.addDocument(document);
      }
    }
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    try (DirectoryReader reader = DirectoryReader.open(directory)) {
      IndexSearcher searcher = new IndexSearcher(reader);
      searcher.setSimilarity(new BM25Similarity(0.9f, 0.4f));
      for (String query : Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8)) {
        List<String> terms = analyze(analyzer, query);
        Map<String, Long> counts = new LinkedHashMap<>();
        for (String t : terms) counts.merge(t, 1L, Long::sum);
        BooleanQuery.Builder builder = new BooleanQuery.Builder();
        for (Map.Entry<String, Long> e : counts.entrySet()) {
          builder.add(new BoostQuery(new TermQuery(new Term("contents", e.getKey())), (float) e.getValue()),
              BooleanClause.Occur.SHOULD);
        }
        TopDocs hits = searcher.search(builder.build(), k, BREAK_SCORE_TIES_BY_DOCID, true);
        StringBuilder json = new StringBuilder("{\"query\": ").append(quote(query)).append(", \"terms\": [");
        for (int i = 0; i < terms.size(); i++) json.append(i > 0 ? ", " : "").append(quote(terms.get(i)));
        json.append("], \"hits\": [");
        for (int i = 0; i < hits.scoreDocs.length; i++) {
          ScoreDoc hit = hits.scoreDocs[i];
          json.append(i > 0 ? ", " : "").append("[").append(quote(searcher.doc(hit.doc).get("id"))).append(", ")
              .append(Float.toString(hit.score)).append("]");
        }
        out.println(json.append("]}"));
      }
    }
    out.flush();
    System.err.println("lucene " + LucenePackage.get().getSpecificationVersion());
  }

  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  /** A JSON object whose values are all strings (WebShop's index documents as the stand-in writes them). */
  static Map<String, String> parseFlatObject(String line) {
    Map<String, String> fields = new LinkedHashMap<>();
    int[] at = {skip(line, 0)};
    expect(line, at, '{');
    while (true) {
      at[0] = skip(line, at[0]);
      if (line.charAt(at[0]) == '}') break;
      String key = parseString(line, at);
      at[0] = skip(line, at[0]);
      expect(line, at, ':');
      at[0] = skip(line, at[0]);
      fields.put(key, parseString(line, at));
      at[0] = skip(line, at[0]);
      if (line.charAt(at[0]) == ',') at[0]++;
    }
    return fields;
  }

  static int skip(String s, int i) {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
    return i;
  }

  static void expect(String s, int[] at, char c) {
    if (s.charAt(at[0]) != c) throw new IllegalArgumentException("expected '" + c + "' at " + at[0] + " of " + s);
    at[0]++;
  }

  static String parseString(String s, int[] at) {
    expect(s, at, '"');
    StringBuilder b = new StringBuilder();
    while (true) {
      char c = s.charAt(at[0]++);
      if (c == '"') return b.toString();
      if (c != '\\') {
        b.append(c);
        continue;
      }
      char e = s.charAt(at[0]++);
      switch (e) {
        case 'b': b.append('\b'); break;
        case 'f': b.append('\f'); break;
        case 'n': b.append('\n'); break;
        case 'r': b.append('\r'); break;
        case 't': b.append('\t'); break;
        case 'u': b.append((char) Integer.parseInt(s.substring(at[0], at[0] + 4), 16)); at[0] += 4; break;
        default: b.append(e);
      }
    }
  }
}
