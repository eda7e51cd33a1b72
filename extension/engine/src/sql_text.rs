//! Rewriting calls in SQL text that PostgreSQL's deparser wrote: the analytics engine marks
//! an aggregate call it must hand to DuckDB in another form with a `FILTER (WHERE (k <> 0))`
//! clause, `k` its number, and replaces the marked calls in the text.

/// Replace every `name(args) FILTER (WHERE (k <> 0))` of `sql` (outside quoted literals and
/// identifiers, `name` not part of a longer name) with `replace(k, args)`. Err if a call of
/// `name` is not marked that way, or a marker is malformed.
pub fn replace_marked_calls(sql: &str, name: &str, mut replace: impl FnMut(u32, &str) -> Option<String>) -> Result<String, String> {
    let b = sql.as_bytes();
    let call = format!("{name}(");
    let mut out = String::with_capacity(sql.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => i = skip_quoted(b, i, q),
            _ if sql[i..].starts_with(&call) && (i == 0 || !is_name_byte(b[i - 1])) => {
                let open = i + name.len();
                let close = matching_paren(b, open).ok_or_else(|| format!("unbalanced {name}( in the query text"))?;
                let args = &sql[open + 1..close];
                let rest = &sql[close + 1..];
                let marker = rest.strip_prefix(" FILTER (WHERE (").ok_or_else(|| format!("an unmarked {name}(…) in the query text"))?;
                let digits = marker.bytes().take_while(u8::is_ascii_digit).count();
                let k: u32 = marker[..digits].parse().map_err(|_| format!("a malformed marker of {name}(…)"))?;
                if !marker[digits..].starts_with(" <> 0))") {
                    return Err(format!("a malformed marker of {name}(…)"));
                }
                let end = close + 1 + " FILTER (WHERE (".len() + digits + " <> 0))".len();
                out.push_str(&sql[copied..i]);
                out.push_str(&replace(k, args).ok_or_else(|| format!("an unknown marker {k} of {name}(…)"))?);
                copied = end;
                i = end;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'"' || c >= 0x80
}

/// The index after the literal or quoted identifier opening at `start` (a doubled quote
/// stands for itself).
fn skip_quoted(b: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        if b[i] == quote {
            if b.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    b.len()
}

/// The index of the parenthesis closing the one at `open`.
fn matching_paren(b: &[u8], open: usize) -> Option<usize> {
    let (mut depth, mut i) = (0usize, open);
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i = skip_quoted(b, i, q);
                continue;
            }
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(sql: &str) -> Result<String, String> {
        replace_marked_calls(sql, "avg", |k, args| (k < 10).then(|| format!("f{k}[{args}]")))
    }

    #[test]
    fn marked_calls_are_replaced() {
        assert_eq!(
            rewrite("SELECT x WHERE (a < avg(t.b) FILTER (WHERE (1 <> 0))) AND c > (SELECT avg((d + 1)) FILTER (WHERE (2 <> 0)) FROM u)"),
            Ok("SELECT x WHERE (a < f1[t.b]) AND c > (SELECT f2[(d + 1)] FROM u)".to_string())
        );
    }

    #[test]
    fn quotes_and_longer_names_are_left_alone() {
        assert_eq!(rewrite("SELECT 'avg(x)', \"avg(\", myavg(y), t.avg(z)"), Ok("SELECT 'avg(x)', \"avg(\", myavg(y), t.avg(z)".into()));
        assert_eq!(rewrite("SELECT avg(')(''') FILTER (WHERE (3 <> 0))"), Ok("SELECT f3[')(''']".into()));
    }

    #[test]
    fn unmarked_or_unknown_calls_are_errors() {
        assert!(rewrite("SELECT avg(x) FROM t").is_err());
        assert!(rewrite("SELECT avg(x) FILTER (WHERE (x > 0))").is_err());
        assert!(rewrite("SELECT avg(x) FILTER (WHERE (12 <> 0))").is_err(), "unknown marker");
        assert!(rewrite("SELECT avg(x").is_err());
    }
}
